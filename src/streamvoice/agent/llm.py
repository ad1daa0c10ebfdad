"""Language model sources: one async interface that yields text deltas as the model writes them.

- ``local_llm.LlamaCppSource``: the offline default, llama.cpp in-process (xllamacpp) with Gemma 3 270M.
- ``OpenAICompatibleSource``: any ``/v1/chat/completions`` (or ``/v1/completions``) server: Ollama, vLLM,
  llama.cpp's server, OpenAI.
- ``BedrockSource``: Amazon Bedrock through Strands Agents, as in the AWS reference sample.
- ``ScriptedTextSource``: a fixed answer at a configurable pace, for tests and benchmarks; it says so.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from streamvoice.client.sse import aiter_sse


class LLMError(RuntimeError):
    """The language model failed; the message is safe to show a caller."""


class Past(Protocol):
    """One entry of a conversation's history (``conversations.Entry``)."""

    @property
    def role(self) -> str: ...  # "user" or "assistant"

    @property
    def text(self) -> str: ...

    @property
    def cut_off(self) -> bool: ...  # an answer the caller interrupted: ``text`` is what it heard


History = Sequence[Past]
CUT_OFF = " [interrupted: the user heard only this much]"  # what the model reads after a cut answer


# What frames a turn for the model: the local model's few-shot "Question:"/"Answer:" and the cut-off marker.
# Matched in any case and with spaces before the colon ("qUeStIoN :").
_FRAME_MARKERS = re.compile(r"(?i)(?:question|answer)\s*:|\[\s*interrupted\s*:")


def defanged(text: str) -> str:
    """``text`` with every frame marker removed until none is left: removing once let nesting rebuild one
    ("QuesQuestion:tion:" became "Question:"). Checked by ``pytest tests/test_llm.py``."""
    while (stripped := _FRAME_MARKERS.sub("", text)) != text:
        text = stripped
    return text


def said(entry: Past) -> str:
    """An entry as the model reads it: a cut answer says so, so the model does not assume the rest was heard;
    no entry can forge the frame or the marker (``defanged``)."""
    text = defanged(entry.text)
    return text + CUT_OFF if entry.cut_off else text


class TextSource(Protocol):
    name: str

    def stream(self, prompt: str, history: History = ()) -> AsyncIterator[str]: ...


# --- scripted --------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"\s*\S+")


def split_tokens(text: str) -> list[str]:
    """Word-sized pieces with their leading whitespace, roughly what an LLM tokenizer streams."""
    tokens: list[str] = []
    for word in _TOKEN_RE.findall(text):
        # long words arrive in several sub-word tokens
        while len(word) > 8:
            tokens.append(word[:6])
            word = word[6:]
        tokens.append(word)
    return tokens


@dataclass
class ScriptedTextSource:
    """Replays a fixed answer with a set time to first token and tokens per second. Not a language model."""

    text: str
    ttft_s: float = 0.2
    tokens_per_s: float = 50.0
    fail_after_tokens: int | None = None  # raise mid-answer, to test failure handling
    name: str = "scripted"
    histories: list[list[str]] = field(default_factory=list)

    async def stream(self, prompt: str, history: History = ()) -> AsyncIterator[str]:
        self.histories.append([said(entry) for entry in history])  # what it was given, for tests to read
        start = time.perf_counter()
        for i, token in enumerate(split_tokens(self.text)):
            if self.fail_after_tokens is not None and i >= self.fail_after_tokens:
                raise LLMError("scripted failure mid-answer")
            due = start + self.ttft_s + i / self.tokens_per_s
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            yield token


# --- OpenAI-compatible -----------------------------------------------------------------------------


@dataclass
class OpenAICompatibleSource:
    base_url: str  # e.g. http://localhost:11434/v1
    model: str
    api_key: str | None = None
    system: str = (
        "You are a helpful voice assistant. Answer in a few plain spoken sentences, no lists or markdown."
    )
    completion_prompt: str | None = None  # set for base models: "{prompt}" is replaced by the question
    max_tokens: int = 200
    temperature: float = 0.7
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    timeout_s: float = 60.0
    name: str = "openai"

    async def stream(self, prompt: str, history: History = ()) -> AsyncIterator[str]:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body: dict[str, Any] = {
            "model": self.model,
            "stream": True,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.stop:
            body["stop"] = self.stop
        if self.seed is not None:
            body["seed"] = self.seed
        if self.completion_prompt is not None:
            path = "/completions"
            body["prompt"] = self.completion_prompt.replace("{prompt}", prompt)  # the caller folds history in
        else:
            path = "/chat/completions"
            body["messages"] = [
                {"role": "system", "content": self.system},
                *({"role": entry.role, "content": said(entry)} for entry in history),
                {"role": "user", "content": prompt},
            ]
        url = self.base_url.rstrip("/") + path
        try:
            async with (
                httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s, connect=5.0)) as client,
                client.stream("POST", url, json=body, headers=headers) as resp,
            ):
                if resp.status_code != 200:
                    raise LLMError(f"language model endpoint answered HTTP {resp.status_code}")
                async for event in aiter_sse(resp.aiter_bytes()):
                    if event.data.strip() == "[DONE]":
                        return
                    text = _delta_text(event.data)
                    if text:
                        yield text
        except httpx.HTTPError as exc:
            raise LLMError(
                f"language model endpoint unreachable or failed ({exc.__class__.__name__})"
            ) from None


def _delta_text(data: str) -> str:
    try:
        obj = json.loads(data)
        choice = obj["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
    if "delta" in choice:
        return str(choice["delta"].get("content") or "")
    return str(choice.get("text") or "")


# --- Amazon Bedrock via Strands Agents -------------------------------------------------------------


@dataclass
class BedrockSource:
    model_id: str
    region: str | None = None
    system: str = (
        "You are a helpful voice assistant. Answer in a few plain spoken sentences, no lists or markdown."
    )
    name: str = "bedrock"

    async def stream(self, prompt: str, history: History = ()) -> AsyncIterator[str]:
        from strands import Agent
        from strands.models.bedrock import BedrockModel

        model = BedrockModel(model_id=self.model_id, region_name=self.region, streaming=True)
        messages: Any = [{"role": entry.role, "content": [{"text": said(entry)}]} for entry in history]
        agent = Agent(model=model, system_prompt=self.system, callback_handler=None, messages=messages)
        try:
            async for event in agent.stream_async(prompt):
                data = event.get("data") if isinstance(event, dict) else None
                if isinstance(data, str) and data:
                    yield data
        except Exception as exc:  # botocore raises many types; callers get a safe summary
            raise LLMError(f"Amazon Bedrock call failed ({exc.__class__.__name__})") from None
