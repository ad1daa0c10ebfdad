"""Audio encoders (PCM, WAV, MP3, Opus, AAC), incremental and transport-free."""

from streamvoice.audio.encoders import Encoder, make_encoder

__all__ = ["Encoder", "make_encoder"]
