"""The agent side: LLM sources, the speech pipeline (bidi vs batch), the caller-facing service, the demo."""

from streamvoice.agent.llm import (
    BedrockSource,
    LLMError,
    OpenAICompatibleSource,
    ScriptedTextSource,
    TextSource,
)
from streamvoice.agent.local_llm import LlamaCppSource
from streamvoice.agent.pipeline import SpeechPipeline, TurnOptions

__all__ = [
    "BedrockSource",
    "LLMError",
    "LlamaCppSource",
    "OpenAICompatibleSource",
    "ScriptedTextSource",
    "SpeechPipeline",
    "TextSource",
    "TurnOptions",
]
