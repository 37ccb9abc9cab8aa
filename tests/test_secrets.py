"""A corpus of secret shapes, recorded through Tape: none may reach a tape, a run log, the
changelog, CLI output, an exception message or the screen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapetui import Config, Tape, TapeDrift, TapeError, TapeMiss, ToolDriftError, ToolRegistry
from tapetui.cli import main as cli_main
from tapetui.core import indexcache
from tapetui.core.redact import DEFAULT_REDACTOR
from tapetui.core.store import candidate_path
from tapetui.core.tapefile import read_index
from tapetui.review import accept

PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw"
OPENSSH_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABlwAAAAdzc2gtcn"
EC_BODY = "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oMSsxG/7mR5YoAoGCCqGSM49AwEHoUQDQgAE"
AZURE_KEY = "NpiwJY0HpoogFV/ho3qnToWCx6JjmTTM7nktAiLqeo7FnywO2S3lLhbYGklptH41BYpZX8WAp2Z2MELxmAp116Sr"  # 88 chars
DISCORD_TOKEN = "MTA1NjM4NTY3ODkwMTIzNDU2Nzg.GhIjKl.dIsCoRdToKeN27abcdefghijklmnopqrst"

# name → (arguments holding the secret, the secret strings that must never appear)
CORPUS: dict[str, tuple[dict[str, Any], list[str]]] = {
    # written with escapes: a percent-encoded key in a URL, a percent-encoded parameter name, a JSON \\u escape
    "percent_encoded_key_in_url": (
        {"url": "https://api.example.com/v1?key=sk%2Dproj%2DpctEnc51abcdefghijklmnopqrstuvwx&q=caf%C3%A9"},
        ["pctEnc51abcdefghijklmnopqrstuvwx"],
    ),
    "percent_encoded_param_name": (
        {"url": "https://example.com/login?user=a&pass%77ord=pctPw52secret"},
        ["pctPw52secret"],
    ),
    "json_unicode_escaped_key": (
        {"raw": 'config {"k": "\\u0073k-proj-uniEsc53abcdefghijklmnopqrstu"}'},
        ["uniEsc53abcdefghijklmnopqrstu"],
    ),
    "aws_access_key_in_text": ({"note": "use AKIAZ7Q3X4M2P6L8K0TR for the bucket"}, ["AKIAZ7Q3X4M2P6L8K0TR"]),
    "aws_secret_access_key": (
        {"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq9Q2w7Lrs"},
        ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq9Q2w7Lrs"],
    ),
    "aws_session_token_upper": (
        {"AWS_SESSION_TOKEN": "FwoGZXIvYXdzEBYaDHqa0AP1MkcQKk4Xc"},
        ["FwoGZXIvYXdzEBYaDHqa0AP1MkcQKk4Xc"],
    ),
    "github_classic_pat": (
        {"text": "push with ghp_R8xk2NfQ7vLm3Pz9Tw4Yb6Hc1Dj5Ks0Ga2Ue"},
        ["ghp_R8xk2NfQ7vLm3Pz9Tw4Yb6Hc1Dj5Ks0Ga2Ue"],
    ),
    "github_oauth": (
        {"text": "gho_16C7e42F292c6912E7710c838347Ae178B4a"},
        ["gho_16C7e42F292c6912E7710c838347Ae178B4a"],
    ),
    "github_app_token": (
        {"text": "ghs_9aB8cD7eF6gH5iJ4kL3mN2oP1qR0sT9uV8wX"},
        ["ghs_9aB8cD7eF6gH5iJ4kL3mN2oP1qR0sT9uV8wX"],
    ),
    "github_fine_grained": (
        {"t": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123"},
        ["github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123"],
    ),
    "gitlab_pat": ({"t": "glpat-xY3kP9mQ2wR7tV5nB8cZ"}, ["glpat-xY3kP9mQ2wR7tV5nB8cZ"]),
    "slack_bot_token": ({"t": "xoxb-2048-4096-aBcDeFgHiJkLmNoPqRsT"}, ["xoxb-2048-4096-aBcDeFgHiJkLmNoPqRsT"]),
    "slack_user_token": ({"t": "xoxp-1111-2222-3333-9f8e7d6c5b4a"}, ["xoxp-1111-2222-3333-9f8e7d6c5b4a"]),
    "slack_webhook": (
        {"url": "https://hooks.slack.com/services/T0001/B0002/XyZsecretPathPart42"},
        ["XyZsecretPathPart42"],
    ),
    "jwt_in_text": (
        {"t": "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlX2hlcmVfMTIz ok"},
        ["eyJzdWIiOiIxMjM0NSJ9", "c2lnbmF0dXJlX2hlcmVfMTIz"],
    ),
    "authorization_bearer_in_text": (
        {"raw_headers": "Host: api\r\nAuthorization: Bearer tok_live_8h2k4m6n8p0q2r4s"},
        ["tok_live_8h2k4m6n8p0q2r4s"],
    ),
    "authorization_header_dict": (
        {"headers": {"Authorization": "Bearer abcDEF123456ghiJKL7890"}},
        ["abcDEF123456ghiJKL7890"],
    ),
    "basic_auth_header": ({"headers": {"authorization": "Basic dXNlcjpodW50ZXIyMjI="}}, ["dXNlcjpodW50ZXIyMjI="]),
    "password_in_url": ({"endpoint": "https://deploy:Sup3rS3cretPw@git.example.com/repo.git"}, ["Sup3rS3cretPw"]),
    "postgres_dsn": ({"dsn": "postgres://app:pgPa55w0rdXyz@db.internal:5432/main"}, ["pgPa55w0rdXyz"]),
    "password_in_query": ({"url": "https://example.com/login?user=bob&password=QueryPw998877"}, ["QueryPw998877"]),
    "api_key_in_query": (
        {"url": "https://maps.example.com/v1?api_key=qk_44f1a9b2c3d4e5f6&z=3"},
        ["qk_44f1a9b2c3d4e5f6"],
    ),
    "pem_rsa_private_key": (
        {"key": "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----"},
        [PEM_BODY],
    ),
    "pem_openssh_in_text": (
        {
            "doc": "id_ed25519:\n-----BEGIN OPENSSH PRIVATE KEY-----\n"
            + OPENSSH_BODY
            + "\n-----END OPENSSH PRIVATE KEY-----\nend"
        },
        [OPENSSH_BODY],
    ),
    "pem_ec_private_key": (
        {"pem": "-----BEGIN EC PRIVATE KEY-----\n" + EC_BODY + "\n-----END EC PRIVATE KEY-----"},
        [EC_BODY],
    ),
    "nested_password": ({"config": {"db": {"host": "db", "password": "n3stedDbPw!"}}}, ["n3stedDbPw!"]),
    "token_in_list_of_dicts": (
        {"accounts": [{"name": "a", "token": "listTok_123abc"}, {"name": "b"}]},
        ["listTok_123abc"],
    ),
    "secret_in_list_of_strings": ({"argv": ["--user", "bob", "--password=ArgvPw_7781"]}, ["ArgvPw_7781"]),
    "api_key_upper": ({"API_KEY": "upperApiKeyValue001"}, ["upperApiKeyValue001"]),
    "api_key_camel": ({"apiKey": "camelApiKeyValue002"}, ["camelApiKeyValue002"]),
    "x_api_key_header": ({"headers": {"X-Api-Key": "hdrApiKeyValue003"}}, ["hdrApiKeyValue003"]),
    "client_secret": (
        {"oauth": {"client_id": "public-id", "client_secret": "cliSecretValue004"}},
        ["cliSecretValue004"],
    ),
    "refresh_token": ({"refresh_token": "refreshTokValue005"}, ["refreshTokValue005"]),
    "cookie_header": ({"headers": {"Cookie": "sid=cookieValue006; theme=dark"}}, ["cookieValue006"]),
    "set_cookie": ({"response_headers": {"Set-Cookie": "auth=setCookieValue007"}}, ["setCookieValue007"]),
    "private_key_camel": ({"privateKey": "privKeyValue008"}, ["privKeyValue008"]),
    "session_id_camel": ({"sessionId": "sessIdValue009"}, ["sessIdValue009"]),
    "passphrase": ({"Passphrase": "correct horse battery staple"}, ["correct horse battery staple"]),
    "openai_project_key": ({"t": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"}, ["sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"]),
    "anthropic_key": ({"t": "sk-ant-api03-Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2"}, ["sk-ant-api03-Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2"]),
    "stripe_live_key": ({"t": "sk_live_51HqXyZaBcDeFgHiJkLmNoP"}, ["sk_live_51HqXyZaBcDeFgHiJkLmNoP"]),
    "google_api_key": ({"t": "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"}, ["AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"]),
    "npm_token": ({"t": "npm_abcdefghijklmnopqrstuvwxyz0123456789"}, ["npm_abcdefghijklmnopqrstuvwxyz0123456789"]),
    "huggingface_token": ({"t": "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"}, ["hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"]),
    "sendgrid_key": (
        {"t": "SG.abcdefghijklmnopqr.stuvwxyz0123456789AB"},
        ["SG.abcdefghijklmnopqr.stuvwxyz0123456789AB"],
    ),
    "password_assignment_in_text": ({"log": "connecting with password: TxtPw_4455 now"}, ["TxtPw_4455"]),
    # ---- JSON text inside a string ----
    "json_text_api_key": ({"body": '{"api_key": "jsonApiKeyVal01"}'}, ["jsonApiKeyVal01"]),
    "json_text_password_compact": ({"body": '{"password":"jsonPwVal02"}'}, ["jsonPwVal02"]),
    "json_text_key_word_only": ({"body": '{"auth": {"credentials": "jsonCredVal03"}}'}, ["jsonCredVal03"]),
    "json_text_pretty": ({"body": '{\n  "client_secret": "jsonCliSecVal04",\n  "n": 1\n}'}, ["jsonCliSecVal04"]),
    "json_text_escaped_twice": ({"body": '{\\"token\\":\\"escTokVal05\\"}'}, ["escTokVal05"]),
    "json_text_list": ({"body": '[{"session_id": "jsonSessVal06"}]'}, ["jsonSessVal06"]),
    "json_text_number_secret": ({"body": '{"pin": 1, "password": 4455667788}'}, ["4455667788"]),
    # ---- YAML, env files, config text ----
    "yaml_aws_secret_quoted": (
        {"yaml": 'aws_access_key_id: x\naws_secret_access_key: "yamlAwsSecretV7+/Zq9Q2w7LrsQx"\n'},
        ["yamlAwsSecretV7+/Zq9Q2w7LrsQx"],
    ),
    "yaml_single_quoted": ({"yaml": "db:\n  host: h\n  password: 'yamlSingleQ08'\n"}, ["yamlSingleQ08"]),
    "yaml_secret_key_suffix": ({"yaml": "secret_key: yamlSecretKey09"}, ["yamlSecretKey09"]),
    "env_export_quoted": ({"env": 'export API_KEY="envApiKey10"'}, ["envApiKey10"]),
    "python_dict_repr": ({"repr": "{'user': 'bob', 'password': 'reprPw11'}"}, ["reprPw11"]),
    "go_assignment": ({"src": 'token := "goTok12abc"'}, ["goTok12abc"]),
    # ---- header text ----
    "cookie_header_text": (
        {"raw": "GET / HTTP/1.1\r\nCookie: sid=hdrCookie13; theme=dark\r\nHost: x\r\n"},
        ["hdrCookie13"],
    ),
    "set_cookie_text": (
        {"raw": "HTTP/1.1 200 OK\nSet-Cookie: auth=hdrSetCookie14; Path=/; HttpOnly"},
        ["hdrSetCookie14"],
    ),
    "x_api_key_header_text": ({"raw": "X-Api-Key: hdrXApiKey15"}, ["hdrXApiKey15"]),
    "authorization_raw_text": ({"raw": "Authorization: hdrRawAuth16abc"}, ["hdrRawAuth16abc"]),
    "discord_authorization_bot": ({"raw": "Authorization: Bot hdrBotTok17abcdef"}, ["hdrBotTok17abcdef"]),
    "headers_as_json_text": ({"raw": '{"Cookie": "sid=hdrJsonCookie18", "Accept": "*/*"}'}, ["hdrJsonCookie18"]),
    "headers_list_of_pairs": ({"headers": [["Cookie", "sid=pairCookie19"], ["Accept", "*/*"]]}, ["pairCookie19"]),
    # ---- cloud and chat tokens ----
    "azure_connection_string": (
        {
            "conn": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
            + AZURE_KEY
            + ";EndpointSuffix=core.windows.net"
        },
        [AZURE_KEY],
    ),
    "azure_sas_url": (
        {
            "url": "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&sp=r&se=2030-01-01"
            "&sig=SasSig20%2BabcDEF%3D"
        },
        ["SasSig20%2BabcDEF%3D"],
    ),
    "azure_service_bus": (
        {"conn": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=SbKey21abcdefgh="},
        ["SbKey21abcdefgh="],
    ),
    "twilio_api_key": (
        {"t": "twilio key SK7f3e9a1b2c4d6e8f0a1b3c5d7e9f1a2b in use"},
        ["SK7f3e9a1b2c4d6e8f0a1b3c5d7e9f1a2b"],
    ),
    "discord_bot_token": ({"t": DISCORD_TOKEN}, [DISCORD_TOKEN]),
    # ---- dict keys that are secrets themselves ----
    "dict_key_anthropic": ({"sk-ant-api03-KeyAsDictKey22xyzabcdef": "v"}, ["sk-ant-api03-KeyAsDictKey22xyzabcdef"]),
    "dict_key_aws_nested": ({"keys": {"AKIAKEYASDICTK3Y23B4": 1, "other": 2}}, ["AKIAKEYASDICTK3Y23B4"]),
    "dict_key_github_in_list": (
        {"x": [{"ghp_DictKeyInList24abcdefghijklmnop": True}]},
        ["ghp_DictKeyInList24abcdefghijklmnop"],
    ),
    "dict_key_two_secrets": (
        {"sk-live-TwoKeys25aaaaaaaaaaaa": 1, "sk-live-TwoKeys25bbbbbbbbbbbb": 2, "[REDACTED]": 3},
        ["sk-live-TwoKeys25aaaaaaaaaaaa", "sk-live-TwoKeys25bbbbbbbbbbbb"],
    ),
    "dict_key_header_line": ({"Cookie: sid=keyCookie26": "seen"}, ["keyCookie26"]),
}
# Exception text: a tool raises with each of these messages (recorded as the call's error).
EXC_CORPUS: dict[str, tuple[str, list[str]]] = {
    "exc_json_text": ('upstream said {"error": {"api_key": "excJsonKey31"}}', ["excJsonKey31"]),
    "exc_cookie_header": ("request failed; sent Cookie: sid=excCookie32", ["excCookie32"]),
    "exc_url_password": ("cannot connect to postgres://u:excPgPw33@db:5432/x", ["excPgPw33"]),
    "exc_dict_repr": ("bad config {'password': 'excReprPw34'}", ["excReprPw34"]),
    "exc_twilio": ("key SK00112233445566778899aabbccddeeff rejected", ["SK00112233445566778899aabbccddeeff"]),
    "exc_bearer": ("401 for Authorization: Bearer excBearer35abcdef", ["excBearer35abcdef"]),
}
# Tool contracts: parameter defaults and schema values (by parameter/property name, or by value shape).
DEFAULT_SECRETS: dict[str, str] = {
    "param_default_by_name": "defApiKey41xyz",
    "param_default_url_password": "defUrlPw42",
    "param_default_dict": "defDictTok43",
    "schema_default_by_name": "schemaDefPw44",
    "schema_examples_by_name": "schemaExPw45",
    "schema_default_by_value": "AKIASCHEMADEFAULT467",
    "schema_description_bearer": "schemaDescBearer47abc",
    "schema_const_key": "sk-live-schemaConst48abcdefgh",
}
ALL_SECRETS = [s for _, secrets in CORPUS.values() for s in secrets]
ERROR_SECRET = "errTok_5566aa77bb88"
EVERY_SECRET = [
    *ALL_SECRETS,
    ERROR_SECRET,
    *(s for _, ss in EXC_CORPUS.values() for s in ss),
    *DEFAULT_SECRETS.values(),
]
SHAPES = len(CORPUS) + 1 + len(EXC_CORPUS) + len(DEFAULT_SECRETS)  # the login error is one more shape


def test_corpus_is_large_enough() -> None:
    assert SHAPES >= 60, SHAPES
    # every secret really is in what the tools see (else its absence from disk would prove nothing)
    for name, (payload, secrets) in CORPUS.items():
        text = repr(payload)
        assert all(s in text or s in str(payload) for s in secrets), name


VAULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "password": {
            "type": "string",
            "minLength": 8,
            "default": DEFAULT_SECRETS["schema_default_by_name"],
            "examples": [DEFAULT_SECRETS["schema_examples_by_name"]],
        },
        "region": {"type": "string", "default": DEFAULT_SECRETS["schema_default_by_value"]},
        "auth": {
            "type": "string",
            "description": f"sent as Authorization: Bearer {DEFAULT_SECRETS['schema_description_bearer']}",
        },
        "mode": {"const": DEFAULT_SECRETS["schema_const_key"]},
    },
}
VAULT_OPTS = {"token": DEFAULT_SECRETS["param_default_dict"], "retries": 2}


def _registry(api_key: str = DEFAULT_SECRETS["param_default_by_name"], vault_version: str = "1.0") -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1.0")
    def echo(case: str, n: int, payload: Any) -> dict[str, Any]:
        return {"case": case, "echo": payload}  # the result carries the secret too

    @reg.tool(schema={"type": "object"}, version="1.0")
    def login(user: str) -> None:
        raise PermissionError(f"login refused for {user}: token {ERROR_SECRET} expired")

    @reg.tool(schema={"type": "object"}, version="1.0")
    def explode(case: str, n: int) -> None:
        raise RuntimeError(EXC_CORPUS[case][0])

    def vault(
        q: str,
        n: int = 0,
        api_key: str = api_key,
        endpoint: str = f"https://svc:{DEFAULT_SECRETS['param_default_url_password']}@api.example.com/v1",
        opts: dict[str, Any] = VAULT_OPTS,
    ) -> dict[str, Any]:
        return {"q": q, "n": n}

    reg.register(vault, schema=VAULT_SCHEMA, version=vault_version)
    return reg


def _session(tape: Tape, n: int) -> list[BaseException]:
    raised: list[BaseException] = []
    for name, (payload, _) in CORPUS.items():
        try:
            tape.call("echo", {"case": name, "n": n, "payload": payload})
        except TapeError as e:
            raised.append(e)
    try:
        tape.call("login", {"user": "bob"})
    except (PermissionError, TapeError) as e:
        raised.append(e)
    for name in EXC_CORPUS:
        try:
            tape.call("explode", {"case": name, "n": n})
        except (RuntimeError, TapeError) as e:
            raised.append(e)
    try:
        tape.call("vault", {"q": "x", "n": n})
    except TapeError as e:
        raised.append(e)
    return raised


def _assert_clean(where: str, text: str) -> None:
    leaked = [s for s in EVERY_SECRET if s in text]
    assert not leaked, f"secrets reached {where}: {leaked}"


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Config, Path, list[BaseException]]:
    """Record the corpus, record it again with other arguments (a candidate), replay with drift."""
    tapes = tmp_path / "tapes"
    tapes.mkdir()
    cfg = Config.for_dir(tapes)
    golden = tapes / "corpus.jsonl"
    reg = _registry()
    with Tape(golden, mode="record", registry=reg, config=cfg) as t:
        _session(t, 1)
    with Tape(golden, mode="record", registry=reg, config=cfg) as t:  # golden exists: this makes a candidate
        _session(t, 2)
    assert candidate_path(golden).exists()
    raised = []
    with Tape(golden, mode="replay", registry=reg, config=cfg) as t:  # n differs: drift at every step
        raised += _session(t, 3)
    assert any(isinstance(e, TapeDrift) for e in raised)
    return cfg, golden, raised


def test_no_secret_reaches_tapes_run_log_changelog_or_exceptions(
    recorded: tuple[Config, Path, list[BaseException]],
) -> None:
    cfg, golden, raised = recorded
    for p in (golden, candidate_path(golden), golden.with_name("corpus.run.jsonl")):
        _assert_clean(p.name, p.read_text())
    assert b"[REDACTED]" in golden.read_bytes()
    for e in raised:
        _assert_clean(f"{type(e).__name__} message", str(e))
    accept(
        cfg, golden, f"rotated keys; old one was ghp_R8xk2NfQ7vLm3Pz9Tw4Yb6Hc1Dj5Ks0Ga2Ue, then token {ERROR_SECRET}"
    )
    _assert_clean("the changelog", cfg.changelog.read_text())
    _assert_clean("the accepted golden", golden.read_text())


def test_no_secret_reaches_cli_output(
    recorded: tuple[Config, Path, list[BaseException]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg, golden, _ = recorded
    monkeypatch.chdir(cfg.tapes_dir)
    for argv in (
        ["check", "."],
        ["check", ".", "--json"],
        ["diff", str(golden)],
        ["diff", str(golden), "--json"],
        ["stats", str(golden)],
        ["pending"],
    ):
        cli_main(argv)
        out, err = capsys.readouterr()
        assert out + err, argv
        _assert_clean(" ".join(argv), out + err)


@pytest.mark.slow
async def test_no_secret_reaches_the_screen(recorded: tuple[Config, Path, list[BaseException]]) -> None:
    from tapetui.tui.app import TapeApp
    from tapetui.tui.widgets.session_tree import StepRef
    from tests.test_tui import _visible, wait_for

    cfg, golden, _ = recorded
    app = TapeApp(cfg, watch=False)
    async with app.run_test(size=(160, 60)) as pilot:
        await wait_for(pilot, lambda: all(s.loaded for s in app.sessions.values()))
        seen = [_visible(app)]
        await pilot.press("enter")  # open the session: its steps
        for name in [*CORPUS, "login"]:
            await pilot.press("j")
            node = app.session_tree.cursor_node
            assert node is not None and isinstance(node.data, StepRef)
            await wait_for(pilot, lambda name=name: name in _visible(app))  # type: ignore[misc]
            seen.append(_visible(app))
        screen = "\n".join(seen)
        assert "[REDACTED]" in screen
        _assert_clean("the screen", screen)


# ---- every file written, walked and grepped -------------------------------------------------------
def _from_tape(e: BaseException) -> bool:
    """Raised again from a tape (by tapetui's code), not by a live tool."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and "tapetui" in tb.tb_frame.f_code.co_filename


def _files_under(*roots: Path) -> list[Path]:
    return sorted(p for root in roots if root.exists() for p in root.rglob("*") if p.is_file())


def _grep_clean(files: list[Path]) -> None:
    for p in files:
        data = p.read_bytes()
        leaked = [s for s in EVERY_SECRET if s.encode() in data or orjson.dumps(s)[1:-1] in data]
        assert not leaked, f"secrets reached {p}: {leaked}"


def test_no_secret_in_any_file_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Record, a torn tail, fill, replay with drift and a miss, accept, a second and third recording (a
    sample), contract drift, the index cache: then every file under the folders involved is grepped."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TAPETUI_CACHE_DIR", str(cache))
    monkeypatch.setattr(indexcache, "MIN_BYTES", 4096)  # the corpus tape is bigger: it is cached
    monkeypatch.setattr(indexcache, "RACY_NS", 0)
    tapes = tmp_path / "tapes"
    tapes.mkdir()
    cfg = Config.for_dir(tapes)
    golden = tapes / "all.jsonl"
    reg = _registry()
    raised: list[BaseException] = []

    # 1. record; half way, a writer killed mid-line (its partial line), then the next append sets it aside
    with Tape(golden, "record", reg, config=cfg, labels={"deploy": f"token: {ERROR_SECRET}"}) as t:
        for name in list(CORPUS)[:10]:
            t.call("echo", {"case": name, "n": 1, "payload": CORPUS[name][0]})
        last = golden.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        with open(golden, "ab") as fh:
            fh.write(last[: len(last) // 2])  # the torn line a killed writer leaves
        for name in list(CORPUS)[10:]:
            t.call("echo", {"case": name, "n": 1, "payload": CORPUS[name][0]})
        for call in (
            lambda: t.call("login", {"user": "bob"}),
            lambda: t.call("vault", {"q": "x", "n": 1}),
            *(lambda name=name: t.call("explode", {"case": name, "n": 1}) for name in EXC_CORPUS),
        ):
            try:
                call()
            except (PermissionError, RuntimeError) as e:
                raised.append(e)
    torn = golden.with_name(golden.name + ".torn")
    assert torn.exists(), "the torn tail was set aside"
    tool_lines = [orjson.loads(x) for x in golden.read_bytes().splitlines() if b'"type":"tool"' in x]
    assert {m["name"]: m.get("form") for m in tool_lines} == {"echo": 3, "login": 3, "vault": 3, "explode": 3}
    vault_line = next(m for m in tool_lines if m["name"] == "vault")
    assert vault_line["schema"]["properties"]["password"]["minLength"] == 8  # the structure stays
    assert vault_line["schema"]["properties"]["password"]["default"] == "[REDACTED]"

    # 2. fill: the corpus again (hits, carried) and new calls (misses, run live) make a candidate
    with Tape(golden, "fill", reg, config=cfg) as t:
        raised += _session(t, 1)
        t.call("echo", {"case": "new", "n": 9, "payload": CORPUS["json_text_api_key"][0]})
    assert candidate_path(golden).exists()

    # 3. replays: drift at every step, a miss, and contract drift (a new version), each with its run log
    with Tape(golden, "replay", reg, config=cfg) as t:
        raised += _session(t, 3)
    with Tape(golden, "replay", reg, config=cfg) as t:
        with pytest.raises(TapeMiss) as miss:
            t.call("login", {"user": CORPUS["cookie_header_text"][0]["raw"]})  # step 1 is an echo: a miss
        raised.append(miss.value)
    rotated = _registry(api_key="rotatedApiKey49xyz")
    with Tape(golden, "replay", rotated, config=cfg) as t:  # form 2: a rotated key is not a contract change
        errors = _session(t, 1)
    assert not [e for e in errors if isinstance(e, TapeError)], errors
    raised += errors
    newer = _registry(api_key="rotatedApiKey49xyz", vault_version="2.0")
    with Tape(golden, "replay", newer, config=cfg) as t:
        for name in CORPUS:
            t.call("echo", {"case": name, "n": 1, "payload": CORPUS[name][0]})
        with pytest.raises(PermissionError):
            t.call("login", {"user": "bob"})
        with pytest.raises(ToolDriftError) as drift:
            t.call("vault", {"q": "x", "n": 1})
        raised.append(drift.value)
    assert "version: 1.0 → 2.0" in str(drift.value)

    # 4. accept the candidate: the changelog, with a rationale that holds secrets too
    accept(cfg, golden, f"rotated; the old one was {CORPUS['anthropic_key'][1][0]} and {DISCORD_TOKEN}")
    # 5. two more recordings: the first becomes a candidate, the second moves it into the samples folder
    for _ in range(2):
        with Tape(golden, "record", reg, config=cfg) as t:
            raised += _session(t, 4)
    # 6. the index cache: the golden is big enough to be kept
    read_index(golden)
    read_index(candidate_path(golden))

    replayed = [e for e in raised if isinstance(e, TapeError) or not e.__traceback__ or _from_tape(e)]
    assert len(replayed) > 10
    for e in replayed:  # what tapetui raised, or raised again from a tape (a live tool's own error is its own)
        _assert_clean(f"{type(e).__name__} message", str(e))
    files = _files_under(tapes, cache)
    names = {p.name for p in files}
    assert {"all.jsonl", "all.candidate.jsonl", "all.run.jsonl", "CHANGELOG.md", "all.jsonl.torn"} <= names, names
    assert any(p.suffix == ".idx" for p in files), "an index-cache entry was written"
    assert any(p.parent.name == "all.samples" for p in files), "a sample was written"
    _grep_clean(files)


# ---- the redactor's own promises ------------------------------------------------------------------
def test_secret_dict_keys_are_renamed_deterministically_and_never_collide() -> None:
    from tapetui.core.canon import canon, canonical_json
    from tapetui.core.redact import DEFAULT_REDACTOR as r

    a, b = "sk-live-KeyOrderAaaaaaaaaaaaa", "sk-live-KeyOrderBbbbbbbbbbbbb"
    one = r.redact({a: 1, b: 2, "[REDACTED]": 3, "plain": 4})
    two = r.redact({"plain": 4, "[REDACTED]": 3, b: 2, a: 1})
    assert one == two == {"[REDACTED#2]": 1, "[REDACTED#3]": 2, "[REDACTED]": 3, "plain": 4}
    assert r.redact(one) == one  # idempotent: the new names are not secrets
    assert canonical_json(r.canon_form({b: 2, a: 1, "[REDACTED]": 3, "plain": 4})) == canonical_json(canon(one))
    assert canonical_json(r.canon_form({b: 2, a: 1})) == canonical_json(canon(r.redact({a: 1, b: 2})))
    # a key that is a secret and names one: renamed, its value redacted
    assert r.redact({"password=Hunter2Key": "v"}) == {"[REDACTED]": "[REDACTED]"}


_secret_texts = st.sampled_from([s for _, ss in CORPUS.values() for s in ss] + ["password: x1", "Cookie: a=b"])
# secrets behind escapes, once and twice over, as URL text: what a pass decodes
_escaped_texts = st.builds(
    lambda parts: "&".join(parts),
    st.lists(
        st.sampled_from(
            [
                "k=sk%2Dproj%2DAb3dEf6hIj9kLm2nOp5qRs8tUv1",
                "k=sk%252Dproj%252DZy9xWv8uTs7rQp6oNm5lKj4i",
                "pass%77ord=hunter2secret",
                "q=caf%C3%A9%2520x",
                "\\u0073k-proj-uniEsc53abcdefghijklmnopqrstu",
                "%25%",
            ]
        ),
        min_size=1,
        max_size=4,
    ),
)


@given(
    st.recursive(
        st.one_of(st.text(max_size=8), _secret_texts, _escaped_texts, st.integers(-(2**63), 2**63 - 1), st.none()),
        lambda kids: (
            st.lists(kids, max_size=3)
            | st.dictionaries(
                st.one_of(
                    st.text(max_size=6),
                    _secret_texts,
                    st.sampled_from(["token", "Cookie", "[REDACTED]", "[REDACTED#2]"]),
                ),
                kids,
                max_size=4,
            )
        ),
        max_leaves=12,
    )
)
def test_redaction_is_idempotent_and_one_pass_equals_two(value: Any) -> None:
    from tapetui.core.canon import canon, canonical_json
    from tapetui.core.redact import DEFAULT_REDACTOR as r

    once = r.redact(value)
    assert r.redact(once) == once
    assert canonical_json(r.canon_form(value)) == canonical_json(canon(once))


_key_parts = st.sampled_from(
    [
        "pass",
        "word",
        "api",
        "key",
        "Api",
        "KEY",
        "token",
        "se",
        "cret",
        "client",
        "Secret",
        "session",
        "Id",
        "set",
        "cookie",
        "auth",
        "orization",
        "credential",
        "s",
        "sign",
        "ature",
        "private",
        "access",
        "pwd",
        "phrase",
        "ſecret",
        "x",
        "_",
        "-",
        ".",
        " ",
        "9",
        "é",
    ]
)


@given(st.lists(_key_parts, min_size=1, max_size=5).map("".join) | st.text(max_size=12))
def test_json_text_pre_check_admits_every_secret_key(key: str) -> None:
    """The pre-check that lets JSON text inside a string skip decoding never skips a secret key."""
    from tapetui.core.redact import DEFAULT_REDACTOR
    from tapetui.core.redactgates import may_hold_secret_key as _may_hold_secret_key

    if DEFAULT_REDACTOR.is_secret_key(key):
        text = orjson.dumps({"outer": {key: "v"}}).decode()
        assert _may_hold_secret_key(text), key
        assert DEFAULT_REDACTOR.redact_text(text) != text


GLUED = [
    "tokenAKIAIOSFODNN7EXAMPLE",  # an AWS key id run into the word before it
    'log "line one\\nsk-AbCdEfGhIjKlMnOpQrStUvWxYz0123 and more',  # JSON text: the escape's "n" is a word letter
    "text\\thf_abcdefghijklmnopqrstuvwxyz01234567",
    "x\\rghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
    "a\\neyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4fw",
    "cfg\\nglpat-abcdefghijklmnopqrstuvwxyz",
    "key\\nAIzaSyA1234567890abcdefghijklmnopqrstuv",
]
WORDS = [  # each was redacted in part by a looser rule once: a key of arguments holding one would have changed
    "risk-assessment-framework-for-teams",
    "task-management-software-2024-final",
    "desk-projector-stand-with-wheels",
    "the hf_hub_download function",
    "XAKIAIOSFODNN7EXAMPLE1",
    "task_test_runner_configuration_v2",
    "mask_live_preview_renderer_component",
    "the risk-or-reward-assessment-framework",
    "task-proj-management-dashboard-2024",
    "whisk-ant-colony-simulation-model",
    "daily_highs_3f9a8b7c6d5e4f3a2b1c",
    "pnpm_" + "a1" * 18,
    "C:\\\\tsk_management_scripts_folder",  # an escaped backslash, then "tsk_…": no escape letter
]


@pytest.mark.parametrize("text", GLUED)
def test_a_secret_glued_to_the_text_before_it_is_redacted(text: str) -> None:
    out = DEFAULT_REDACTOR.redact_text(text)
    assert "[REDACTED]" in out and not any(part in out for part in ("0123456789", "abcdefghijklmnop", "IOSFODNN"))


@pytest.mark.parametrize("text", WORDS)
def test_words_that_hold_a_prefix_are_not_secrets(text: str) -> None:
    assert DEFAULT_REDACTOR.redact_text(text) == text


PROSE = [  # a scheme's word before an ordinary word is not a credential: a prompt keeps what it says
    "Explain basic arithmetic to a child.",
    "Start with basic arithmetic, then token classification.",
    "Bearer Certificates were common in the 1920s",
    "Subscribe to the weekly digest newsletter",
    "the token representations of a well-known sentence",
    "Basic Concepts and Basic troubleshooting",
    "a token-level classification of internationalization",
]


@pytest.mark.parametrize("text", PROSE)
def test_a_schemes_word_before_prose_is_not_a_credential(text: str) -> None:
    assert DEFAULT_REDACTOR.redact_text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "Bearer abc.def.ghi",  # a dot inside
        "Basic dXNlcjpwYXNz",  # base64: a lower letter then a capital
        "token tok_live_8h2k4m6n8p0q2r4s",
        "Token 1234567890",
        "bearer qwertyuiopasdfghjklzx",  # letters only, longer than any word
        "Digest abcd+efgh/ijkl==",
    ],
)
def test_a_credential_after_its_schemes_word_is_redacted(text: str) -> None:
    out = DEFAULT_REDACTOR.redact_text(text)
    assert out == text.split()[0] + " [REDACTED]"


@pytest.mark.parametrize("key", ["stop_token", "eos_token", "pad_token", "token_type", "logit_bias_token", "token_ids"])
def test_a_tokenizers_token_is_not_a_credential(key: str) -> None:
    assert not DEFAULT_REDACTOR.is_secret_key(key)


@pytest.mark.parametrize("key", ["access_token", "refresh_token", "id_token", "csrf_token", "token", "authToken"])
def test_a_credentials_token_is_secret(key: str) -> None:
    assert DEFAULT_REDACTOR.is_secret_key(key)


def test_a_changed_prompt_with_a_schemes_word_is_drift_not_a_hit(tmp_path: Path) -> None:
    """A prompt is keyed as redacted: prose taken for a credential made "basic arithmetic" and "basic geometry" one
    request, replayed as a hit with the recording's (redacted) answer."""
    reg = ToolRegistry()

    @reg.tool(version="1")
    def ask(prompt: str) -> str:
        return f"Start with {prompt.split()[1]} basics, then token classification."

    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", reg) as t:
        assert t.call("ask", {"prompt": "Explain basic arithmetic to a child."}) == (
            "Start with basic basics, then token classification."
        )
    with Tape(tape, "replay", reg) as t:
        assert t.call("ask", {"prompt": "Explain basic arithmetic to a child."}).endswith("token classification.")
    with Tape(tape, "replay", reg) as t, pytest.raises(TapeDrift, match="basic arithmetic.*basic geometry"):
        t.call("ask", {"prompt": "Explain basic geometry to a child."})
    assert "basic arithmetic" in tape.read_text()


@pytest.mark.parametrize(
    "text",
    [
        "https://x.io/search?q=caf%C3%A9%20au%20lait&n=100%25",  # escapes and no secret: kept as written
        "x %FF%FE y %zz 100%",  # not UTF-8, not an escape
        "a \\ud83d\\ude00 b \\u00e9",  # JSON escapes, a surrogate pair among them
    ],
)
def test_text_with_escapes_and_no_secret_is_kept_as_written(text: str) -> None:
    assert DEFAULT_REDACTOR.redact_text(text) == text


def test_a_secret_encoded_twice_is_redacted_in_one_pass() -> None:
    """Redacting what a redaction returned changes nothing (check recomputes stored keys that way): a secret
    encoded twice beside one encoded once is found by the first pass too."""
    once, twice = "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "Zy9xWv8uTs7rQp6oNm5lKj4iHg3fEd2c"
    out = DEFAULT_REDACTOR.redact_text(f"https://x.io/?a=sk%2Dproj%2D{once}&b=sk%252Dproj%252D{twice}")
    assert once not in out and twice not in out and DEFAULT_REDACTOR.redact_text(out) == out


def test_a_secret_behind_escapes_is_redacted_and_the_text_kept_decoded() -> None:
    key = "sk%2Dproj%2D" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    out = DEFAULT_REDACTOR.redact_text(f"https://x.io/p?k={key}&q=caf%C3%A9")
    assert out == "https://x.io/p?k=[REDACTED]&q=café" and DEFAULT_REDACTOR.redact_text(out) == out


@given(st.lists(_secret_texts | st.text(max_size=40), min_size=1, max_size=4).map(" ".join))
def test_a_text_redacted_again_comes_out_as_a_fresh_redactor_makes_it(text: str) -> None:
    """A redactor remembers the texts it redacted (a conversation's history comes again in every later turn):
    what it remembers is what it would make afresh, an unchanged text is the very object passed (the walk
    shares unchanged parts), and a counting redactor counts every secret of every call."""
    from tapetui.core.redact import Redactor

    shared = Redactor()
    first, again = shared.redact_text(text), shared.redact_text("".join(list(text)))  # an equal, other string
    assert first == again == Redactor().redact_text(text)
    copy = "".join(list(text))
    if first == text:
        assert shared.redact_text(copy) is copy
    counting = shared.counting()
    counting.redact_text(text)
    once = sum(counting.counts.values())
    counting.redact_text(copy)
    assert sum(counting.counts.values()) == 2 * once


def test_a_redactor_forgets_what_it_remembered_past_its_bound() -> None:
    import sys

    from tapetui.core import redact

    r = redact.Redactor()
    for i in range(redact._MEMO_TEXTS + 10):
        r.redact_text(f"text number {i}, with spaces")
    assert len(r._text_memo) <= redact._MEMO_TEXTS
    for i in range(40):  # texts whose redacted forms are longer than they are, some 4 bytes a character
        r.redact_text(("pwd=a& " * 4000) + ("\U0001f600" * 1000) + str(i))
    held = sum(sys.getsizeof(k) + (sys.getsizeof(v) if v is not None else 0) for k, v in r._text_memo.items())
    assert held <= redact._MEMO_BYTES
    big = "y " * (redact._MEMO_MAX // 2 + 1)
    r.redact_text(big)
    assert big not in r._text_memo  # a big result is not kept alive by the redactor


def test_json_text_first_found_too_deep_is_redacted_by_its_keys_where_it_is_shallow() -> None:
    """Past Python's recursion limit a JSON text inside a string gets only the value rules: that result is not
    remembered for the same text found where its keys can be read."""
    from tapetui.core.redact import Redactor

    inner: Any = {"credentials": "hunter2-not-a-pattern"}  # secret by its key's name only
    for _ in range(300):
        inner = {"a": inner}
    text = json.dumps(inner)  # orjson writes 254 levels at most
    deep: Any = text
    for _ in range(720):
        deep = [deep]
    shared = Redactor()
    shared.redact(deep)
    assert "hunter2" not in json.dumps(shared.redact({"note": text}))


def test_a_str_subclass_is_redacted_as_its_text_and_never_served_another_texts_result() -> None:
    from tapetui.core.redact import Redactor

    class Unhashable(str):
        def __eq__(self, other: object) -> bool:
            return str.__eq__(self, other)

    class AnyCase(str):
        def __eq__(self, other: object) -> bool:
            return isinstance(other, str) and self.lower() == other.lower()

        def __hash__(self) -> int:
            return hash(self.lower())

    r = Redactor()
    assert r.redact({"note": Unhashable("see token=abcdef123456 here")}) == {"note": "see token=[REDACTED] here"}
    key = "AKIA" + "ABCDEFGHIJKLMNOP"
    assert r.redact_text("id " + key.lower()) == "id " + key.lower()  # no secret in lower case
    assert r.redact_text(AnyCase("id " + key)) == "id [REDACTED]"


_needle_bits = st.sampled_from(
    ["sk-", "SK", "AKIA", "eyJ", "ghp_", "://", "sig=", "hooks.slack.com", "-----BEGIN ", "AIza", "SG.", "xoxb-"]
    + ["Token", "BASIC", "ſecret", "\u212aey", "auth", "pwd", "api", "word ", "x", ".", "_", "-", "=", ":", " "]
)


@given(st.lists(_needle_bits | st.text(max_size=8), max_size=12).map("".join), st.integers(0, 5000))
def test_the_pre_check_of_a_long_text_admits_what_the_short_one_admits(text: str, pad: int) -> None:
    """A long text is searched for each needle only where one of its characters is: exactly the texts the
    plain search admits (a text lacking the character holds no needle with it)."""
    from tapetui.core import redactgates as gates

    long = "w" * max(pad, gates.LONG) + text  # past the length where the long search takes over
    plain_search = (
        any(n in long for n in gates.NEEDS)
        or any(n in gates.fold(long) for n in gates.NEEDS_ANY_CASE)
        or gates.PROBE.search(long) is not None
    )
    assert gates.may_hold_default_secret(long) == plain_search


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_a_secret_a_text_shows_is_redacted_in_a_megabyte_of_text_too(case: str) -> None:
    value, secrets = CORPUS[case]
    # JSON text is read as data only when it is the whole string: in prose its key names are words
    texts = [v for v in value.values() if isinstance(v, str) and v.lstrip()[:1] not in ("{", "[")]
    shown = [s for s in secrets if any(s not in DEFAULT_REDACTOR.redact_text(t) for t in texts if s in t)]
    for text in texts:  # what the text alone gives away nothing of, a megabyte of words around it does not either
        big = DEFAULT_REDACTOR.redact_text("word " * 200_000 + text + " and more words")
        assert not [s for s in shown if s in text and s in big]


# ---- a tape that holds secrets in clear: written by hand, recorded before a rule existed, from a pull request --------
CLEAR = ("PLAINKEY-AAAA1111", "PLAINKEY-BBBB2222", "RESULTBEARER0123456789", "SKSECRETABCDEFGHIJKLMNOP0123")


def _clear_project(tmp_path: Path) -> Path:
    """A project whose golden ``sec`` and its pending candidate hold secrets in clear, and whose golden ``run`` has a
    run log with a drift quoting them; ``bad``'s run log has a malformed event quoting one."""
    from tests.builders import HEADER, call_line

    tapes = tmp_path / "tapes"
    tapes.mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    old = {"api_key": CLEAR[0], "tok": f"sk-proj-{CLEAR[3]}"}
    new = {"api_key": CLEAR[1], "tok": "sk-proj-SKSECRET2ZYXWVUTSRQPONMLKJ987"}
    golden = call_line(seq=1, tool="fetch", args=old, result={"out": f"Bearer {CLEAR[2]}"})
    (tapes / "sec.jsonl").write_bytes(HEADER + golden)
    (tapes / "sec.candidate.jsonl").write_bytes(
        HEADER + call_line(seq=1, tool="fetch", args=new, result={"out": "Bearer RESULTBEARER2222222222"})
    )
    drift = {"event": "drift", "seq": 1, "tool": "fetch", "recorded_args": old, "args": new}
    drift["changes"] = [["api_key", CLEAR[0], CLEAR[1]], ["tok", old["tok"], new["tok"]]]
    (tapes / "run.jsonl").write_bytes(HEADER + golden)
    (tapes / "run.run.jsonl").write_bytes(
        orjson.dumps({"event": "start", "mode": "replay"})
        + b"\n"
        + orjson.dumps(drift)
        + b"\n"
        + orjson.dumps({"event": "end", "stats": {}})
        + b"\n"
    )
    (tapes / "bad.jsonl").write_bytes(HEADER + golden)  # a malformed event's problem quotes its value
    (tapes / "bad.run.jsonl").write_bytes(orjson.dumps({"event": "hit", "seq": f"Bearer {CLEAR[2]}"}) + b"\n")
    return tapes


def test_a_tape_holding_secrets_in_clear_never_prints_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Redaction at record time cannot help a tape that was never redacted: whatever shows a value from it — check
    in every format, diff, export otlp, a malformed event's problem — redacts it as it is shown."""
    _clear_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TAPETUI_CACHE_DIR", "off")
    printed = []
    for argv in (
        *(["check", "--format", fmt] for fmt in ("text", "json", "junit", "github", "markdown")),
        ["diff", "sec"],
        ["diff", "sec", "--json"],
        ["export", "otlp", "sec"],
        ["export", "otlp", "tapes/sec.candidate.jsonl"],
        ["export", "otlp", "run"],
    ):
        cli_main(argv)
        out = capsys.readouterr()
        printed.append((argv, out.out + out.err))
    assert "args.api_key" in printed[0][1] and "[REDACTED]" in printed[0][1]  # the path still shows what changed
    assert any("must be an integer" in text for _, text in printed)  # the quoted event was shown, redacted
    leaks = [(argv, s) for argv, text in printed for s in CLEAR if s in text]
    assert not leaks


@pytest.mark.slow  # an app walk over every pane of a tape of secrets
async def test_a_tape_holding_secrets_in_clear_never_reaches_the_screen(tmp_path: Path) -> None:
    from tapetui.core.config import load_config
    from tapetui.tui.app import TapeApp
    from tests.test_tui import _visible, wait_for

    _clear_project(tmp_path)
    app = TapeApp(load_config(tmp_path / "tapes.toml"), watch=False)
    async with app.run_test(size=(160, 60)) as pilot:
        await wait_for(pilot, lambda: all(s.loaded for s in app.sessions.values()))
        seen = [_visible(app)]
        for i in range(16):  # down the tree, each session and step opened: its detail, its diff (both views), its run
            await pilot.press("enter")
            await pilot.press("j")
            if i == 8:
                await pilot.press("t")
            await pilot.pause()
            seen.append(_visible(app))
        screen = "\n".join(seen)
        assert "api_key" in screen and "[REDACTED]" in screen  # the step is shown, its secret is not
        assert not [s for s in CLEAR if s in screen], [ln for ln in screen.splitlines() if "PLAINKEY" in ln]


def test_what_is_shown_redacted_still_shows_what_changed() -> None:
    """Redacting as shown must not hide a change: a long text's window is placed at the first difference of the
    redacted sides, and a contract's parameter named like a secret is structure, its limits shown."""
    from tapetui.core.changes import format_changes

    head = "Authorization: Bearer sk-live-abcdefghijklmnopqrstuvwx1234\n" + "lorem ipsum dolor sit amet " * 10
    (line,) = format_changes([("text", head + "status=OK", head + "status=FAILED")], prefix="result")
    assert "status=OK" in line and "status=FAILED" in line and "sk-live" not in line
    (contract,) = format_changes([("properties.password.maxLength", 64, 128)], prefix="schema", contract=True)
    assert contract == "schema.properties.password.maxLength  64 → 128"
    (value,) = format_changes([("password", "hunter2-old", "hunter2-new")], prefix="args")
    assert value == 'args.password  "[REDACTED]" → "[REDACTED]"'


def test_export_redacts_a_tool_line_as_the_recorder_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool line in clear (a secret in its description or a default): exported redacted, its parameters named like
    secrets kept as they are (they are the contract's structure)."""
    from tests.builders import HEADER, call_line

    tapes = tmp_path / "tapes"
    tapes.mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    secret = "sk-live-abcdefghijklmnopqrstuvwx1234"
    tool = {
        "type": "tool",
        "name": "login",
        "fingerprint": "0123456789abcdef",
        "description": f"calls with Bearer {secret}",
        "params": [{"name": "api_key", "kind": "positional_or_keyword", "annotation": "str", "default": secret}],
        "schema": {"type": "object", "properties": {"api_key": {"type": "string", "default": secret}}},
    }
    (tapes / "t.jsonl").write_bytes(
        HEADER + orjson.dumps(tool) + b"\n" + call_line(seq=1, tool="login", args={"q": 1}, result=1)
    )
    monkeypatch.chdir(tmp_path)
    assert cli_main(["export", "otlp", "t"]) == 0
    out = capsys.readouterr().out
    assert secret not in out and "calls with Bearer [REDACTED]" in out  # the description is exported, redacted


def test_a_conversation_and_a_replayed_error_in_clear_are_shown_redacted() -> None:
    """The app's conversation view (a turn's instructions, messages, response: text_block) and the wrapper a
    replayed error that is not raised as itself comes back in (TapeReplayedError) show their text redacted."""
    from tapetui.core.errors import TapeReplayedError
    from tapetui.tui.widgets.detail import text_block

    secret = "sk-proj-LEAKMODELINSTR01abcdefghijklmnop"
    shown = text_block(f"Use api key {secret}").plain
    assert secret not in shown and "[REDACTED]" in shown
    e = TapeReplayedError(tool="login", seq=1, type_name="AuthError", module="x.y", message=f"bad key {secret}")
    assert secret not in str(e) and e.message == f"bad key {secret}"  # the attribute keeps it as recorded


def test_a_drift_hidden_by_redaction_says_why() -> None:
    """A change whose sides are alike once redacted, and a drift with no argument that differs as stored (a golden
    keyed on a value in clear that a rule now hides), each say so instead of showing nothing that differs."""
    from tapetui.core.changes import format_changes
    from tapetui.core.errors import TapeDrift

    (line,) = format_changes([("q", "id sk-proj-SKSECRETABCDEFGHIJKLMNOP0123", "id [REDACTED]")], "args")
    assert line.endswith("(they differ where [REDACTED] stands: one side holds a secret in clear)")
    e = TapeDrift(path="t.jsonl", seq=1, tool="f", recorded_key="f:1", new_key="f:2", recorded_args={},
                  new_args={}, changes=[])  # fmt: skip
    assert "no argument differs as stored" in str(e)


@pytest.mark.parametrize("depth", [990, 1100], ids=["deeper-than-python-walks", "deeper-than-orjson-reads"])
def test_json_text_too_deep_to_read_as_data_keeps_no_secret_a_key_names(depth: int) -> None:
    """A string holding JSON nested deeper than it can be read (past Python's recursion limit, or orjson's 1,024
    levels) cannot have a key's value redacted by the key's name: none of it is kept (it was kept whole)."""
    from tapetui.core.redact import TOO_DEEP_TEXT, Redactor

    text = "[" * depth + json.dumps({"zorkfield": "TOPSECRET", "n": 1}) + "]" * depth
    r = Redactor(keys=["zorkfield"])
    assert r.redact_text(text) == TOO_DEEP_TEXT
    assert "TOPSECRET" not in orjson.dumps(r.redact({"result": {"text": text}})).decode()
    shallow = "[" * 5 + json.dumps({"zorkfield": "TOPSECRET", "n": 1}) + "]" * 5
    assert "TOPSECRET" not in r.redact_text(shallow) and '"n":1' in r.redact_text(shallow)
    assert r.redact_text("[not json " + "[" * 2000) == "[not json " + "[" * 2000  # not JSON: the text as it is


@pytest.mark.parametrize(
    "text",
    [
        '\ufeff{"zorkfield": "TOPSECRET", "n": 1}',  # a file read with its BOM
        '{"zorkfield": "TOPSECRET"}\n{"zorkfield": "TOPSECRET"}',  # JSON Lines
        'INFO payload: {"zorkfield": "TOPSECRET"}',  # a log line
        '{"a": 1,}  {"zorkfield": "TOPSECRET"}',  # not JSON at all
        "zork_extra=TOPSECRET; other=1",  # a key named by its pattern
        '{"n": 1}\n{"zorkfield": ["TOPSECRET", {"x": "TOPSECRET"}]}\n',  # JSON Lines: a list's whole value
    ],
)
def test_a_configured_key_in_text_that_is_no_json_document_is_redacted(text: str) -> None:
    """[redact] keys name secrets by their key: in text that does not parse as one JSON document the key and
    its value are found in the text, as the built-in key words are."""
    from tapetui.core.redact import Redactor

    r = Redactor(keys=["zorkfield", "zork_*"])
    once = r.redact_text(text)
    assert "TOPSECRET" not in once and "[REDACTED]" in once and r.redact_text(once) == once
    assert Redactor().redact_text(text) == text  # without the keys: nothing of it is a secret


def test_configured_keys_in_text_are_read_as_fnmatch_reads_them_and_in_linear_time() -> None:
    from tapetui.core.redact import Redactor

    r = Redactor(keys=["zork[12]", "zork[!a]", "zorkfield"])
    text = "zork1=S1 zork3=S2 zorkb=S3 zorka=kept --zorkfield=S4 app.zorkfield=S5 my_zorkfield=kept"
    out = r.redact_text(text)
    assert not any(f"S{i}" in out for i in range(1, 6)) and out.count("kept") == 2, out
    assert Redactor(keys=["", "*"]).redact_text("x == y and a => b") == "x == y and a => b"  # no name: no text rule
    long = "zork" * 50_000  # a key with two wildcards over one long word: linear (it was quadratic: minutes)
    assert Redactor(keys=["*zork*"]).redact_text(long + "=S6").endswith("=[REDACTED]")


def test_json_text_too_deep_for_a_deep_caller_is_recorded_alike_from_any_depth(tmp_path: Path) -> None:
    """Writing the redacted text back also runs out of a deep caller's stack (a recording under pytest and an agent
    framework): it is done again on a stack of its own, never an error that depends on the caller's depth."""
    from tapetui.core.config import load_config

    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "."\n[redact]\nkeys = ["zorkfield"]\n')
    config = load_config(tmp_path / "tapes.toml")
    reg = ToolRegistry()
    reg.register(lambda q: {"text": "[" * q + '{"zorkfield": "TOPSECRET", "n": 1}' + "]" * q}, name="echo", version="1")

    def at(frames: int, depth: int) -> str:
        if frames:
            return at(frames - 1, depth)
        tape = tmp_path / f"d{len(list(tmp_path.glob('d*.jsonl')))}.jsonl"
        with Tape(tape, "record", reg, config=config) as t:
            t.call("echo", {"q": depth})
        return str(orjson.loads(tape.read_bytes().splitlines()[-1])["result"]["text"])

    for depth in range(950, 990, 6):  # every caller's depth: where one runs out is the stack's affair
        kept = {at(frames, depth) for frames in range(0, 30, 2)}
        assert len(kept) == 1 and "TOPSECRET" not in kept.pop(), depth
