"""The agent README's pytest block imports as yours: it calls its tool through the tape it is given (``live=``
is what runs when the call is live, so the tool needs no registry)."""


def summarize(text: str, max_words: int = 120) -> dict:
    words = text.split()[:max_words]
    return {"summary": " ".join(words), "words": len(words)}


def run_agent(tape):
    args = {"text": "Agents call tools. Tools have contracts. Contracts drift.", "max_words": 120}
    return tape.call("summarize", args, live=lambda: summarize(**args))
