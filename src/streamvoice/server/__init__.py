"""The speech server: Kokoro behind SageMaker-compatible HTTP and bidirectional WebSocket routes."""

from streamvoice.server.app import create_app
from streamvoice.server.core.config import ServerConfig

__all__ = ["ServerConfig", "create_app"]
