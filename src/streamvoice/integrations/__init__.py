"""Plugins for the voice-agent frameworks integrators already run, each over the speech client.

Each module imports its framework, installed by its extra: ``streamvoice[livekit]`` for
``streamvoice.integrations.livekit``, ``streamvoice[pipecat]`` for ``streamvoice.integrations.pipecat``.
Nothing here is imported by the rest of the package.
"""
