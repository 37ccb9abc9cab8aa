"""A corpus of secret shapes, recorded through Tape: none may reach a tape, a run log, the
changelog, CLI output, an exception message or the screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tapetui import Config, Tape, TapeDrift, TapeError, ToolRegistry
from tapetui.cli import main as cli_main
from tapetui.golden import accept
from tapetui.store import candidate_path

PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw"
OPENSSH_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABlwAAAAdzc2gtcn"
EC_BODY = "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oMSsxG/7mR5YoAoGCCqGSM49AwEHoUQDQgAE"

# name → (arguments holding the secret, the secret strings that must never appear)
CORPUS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "aws_access_key_in_text": ({"note": "use AKIAZ7Q3X4M2P6L8K0TR for the bucket"}, ["AKIAZ7Q3X4M2P6L8K0TR"]),
    "aws_secret_access_key": ({"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq9Q2w7Lrs"},
                              ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq9Q2w7Lrs"]),
    "aws_session_token_upper": ({"AWS_SESSION_TOKEN": "FwoGZXIvYXdzEBYaDHqa0AP1MkcQKk4Xc"},
                                ["FwoGZXIvYXdzEBYaDHqa0AP1MkcQKk4Xc"]),
    "github_classic_pat": ({"text": "push with ghp_R8xk2NfQ7vLm3Pz9Tw4Yb6Hc1Dj5Ks0Ga2Ue"},
                           ["ghp_R8xk2NfQ7vLm3Pz9Tw4Yb6Hc1Dj5Ks0Ga2Ue"]),
    "github_oauth": ({"text": "gho_16C7e42F292c6912E7710c838347Ae178B4a"}, ["gho_16C7e42F292c6912E7710c838347Ae178B4a"]),
    "github_app_token": ({"text": "ghs_9aB8cD7eF6gH5iJ4kL3mN2oP1qR0sT9uV8wX"}, ["ghs_9aB8cD7eF6gH5iJ4kL3mN2oP1qR0sT9uV8wX"]),
    "github_fine_grained": ({"t": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123"},
                            ["github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123"]),
    "gitlab_pat": ({"t": "glpat-xY3kP9mQ2wR7tV5nB8cZ"}, ["glpat-xY3kP9mQ2wR7tV5nB8cZ"]),
    "slack_bot_token": ({"t": "xoxb-2048-4096-aBcDeFgHiJkLmNoPqRsT"}, ["xoxb-2048-4096-aBcDeFgHiJkLmNoPqRsT"]),
    "slack_user_token": ({"t": "xoxp-1111-2222-3333-9f8e7d6c5b4a"}, ["xoxp-1111-2222-3333-9f8e7d6c5b4a"]),
    "slack_webhook": ({"url": "https://hooks.slack.com/services/T0001/B0002/XyZsecretPathPart42"},
                      ["XyZsecretPathPart42"]),
    "jwt_in_text": ({"t": "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlX2hlcmVfMTIz ok"},
                    ["eyJzdWIiOiIxMjM0NSJ9", "c2lnbmF0dXJlX2hlcmVfMTIz"]),
    "authorization_bearer_in_text": ({"raw_headers": "Host: api\r\nAuthorization: Bearer tok_live_8h2k4m6n8p0q2r4s"},
                                     ["tok_live_8h2k4m6n8p0q2r4s"]),
    "authorization_header_dict": ({"headers": {"Authorization": "Bearer abcDEF123456ghiJKL7890"}},
                                  ["abcDEF123456ghiJKL7890"]),
    "basic_auth_header": ({"headers": {"authorization": "Basic dXNlcjpodW50ZXIyMjI="}}, ["dXNlcjpodW50ZXIyMjI="]),
    "password_in_url": ({"endpoint": "https://deploy:Sup3rS3cretPw@git.example.com/repo.git"}, ["Sup3rS3cretPw"]),
    "postgres_dsn": ({"dsn": "postgres://app:pgPa55w0rdXyz@db.internal:5432/main"}, ["pgPa55w0rdXyz"]),
    "password_in_query": ({"url": "https://example.com/login?user=bob&password=QueryPw998877"}, ["QueryPw998877"]),
    "api_key_in_query": ({"url": "https://maps.example.com/v1?api_key=qk_44f1a9b2c3d4e5f6&z=3"},
                         ["qk_44f1a9b2c3d4e5f6"]),
    "pem_rsa_private_key": ({"key": "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----"},
                            [PEM_BODY]),
    "pem_openssh_in_text": ({"doc": "id_ed25519:\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + OPENSSH_BODY +
                                    "\n-----END OPENSSH PRIVATE KEY-----\nend"}, [OPENSSH_BODY]),
    "pem_ec_private_key": ({"pem": "-----BEGIN EC PRIVATE KEY-----\n" + EC_BODY + "\n-----END EC PRIVATE KEY-----"},
                           [EC_BODY]),
    "nested_password": ({"config": {"db": {"host": "db", "password": "n3stedDbPw!"}}}, ["n3stedDbPw!"]),
    "token_in_list_of_dicts": ({"accounts": [{"name": "a", "token": "listTok_123abc"}, {"name": "b"}]},
                               ["listTok_123abc"]),
    "secret_in_list_of_strings": ({"argv": ["--user", "bob", "--password=ArgvPw_7781"]}, ["ArgvPw_7781"]),
    "api_key_upper": ({"API_KEY": "upperApiKeyValue001"}, ["upperApiKeyValue001"]),
    "api_key_camel": ({"apiKey": "camelApiKeyValue002"}, ["camelApiKeyValue002"]),
    "x_api_key_header": ({"headers": {"X-Api-Key": "hdrApiKeyValue003"}}, ["hdrApiKeyValue003"]),
    "client_secret": ({"oauth": {"client_id": "public-id", "client_secret": "cliSecretValue004"}},
                      ["cliSecretValue004"]),
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
    "sendgrid_key": ({"t": "SG.abcdefghijklmnopqr.stuvwxyz0123456789AB"}, ["SG.abcdefghijklmnopqr.stuvwxyz0123456789AB"]),
    "password_assignment_in_text": ({"log": "connecting with password: TxtPw_4455 now"}, ["TxtPw_4455"]),
}
ALL_SECRETS = [s for _, secrets in CORPUS.values() for s in secrets]
ERROR_SECRET = "errTok_5566aa77bb88"


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 30


def _registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1.0")
    def echo(case: str, n: int, payload: Any) -> dict[str, Any]:
        return {"case": case, "echo": payload}  # the result carries the secret too

    @reg.tool(schema={"type": "object"}, version="1.0")
    def login(user: str) -> None:
        raise PermissionError(f"login refused for {user}: token {ERROR_SECRET} expired")

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
    return raised


def _assert_clean(where: str, text: str) -> None:
    leaked = [s for s in [*ALL_SECRETS, ERROR_SECRET] if s in text]
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


def test_no_secret_reaches_tapes_run_log_changelog_or_exceptions(recorded: tuple[Config, Path, list[BaseException]]
                                                                ) -> None:
    cfg, golden, raised = recorded
    for p in (golden, candidate_path(golden), golden.with_name("corpus.run.jsonl")):
        _assert_clean(p.name, p.read_text())
    assert b"[REDACTED]" in golden.read_bytes()
    for e in raised:
        _assert_clean(f"{type(e).__name__} message", str(e))
    accept(cfg, golden, f"rotated keys; old one was ghp_R8xk2NfQ7vLm3Pz9Tw4Yb6Hc1Dj5Ks0Ga2Ue, then token {ERROR_SECRET}")
    _assert_clean("the changelog", cfg.changelog.read_text())
    _assert_clean("the accepted golden", golden.read_text())


def test_no_secret_reaches_cli_output(recorded: tuple[Config, Path, list[BaseException]],
                                      capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, golden, _ = recorded
    monkeypatch.chdir(cfg.tapes_dir)
    for argv in (["check", "."], ["check", ".", "--json"], ["diff", str(golden)], ["diff", str(golden), "--json"],
                 ["stats", str(golden)], ["pending"]):
        cli_main(argv)
        out, err = capsys.readouterr()
        assert out + err, argv
        _assert_clean(" ".join(argv), out + err)


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
            node = app.tree.cursor_node
            assert node is not None and isinstance(node.data, StepRef)
            await wait_for(pilot, lambda name=name: name in _visible(app))  # type: ignore[misc]
            seen.append(_visible(app))
        screen = "\n".join(seen)
        assert "[REDACTED]" in screen
        _assert_clean("the screen", screen)
