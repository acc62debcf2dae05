"""Model providers over the official SDKs, behind one small interface (:class:`Provider`).

The loop keeps the conversation in the transcript's neutral form (:class:`agents.transcript.Event`);
each provider converts it to its wire format on every call and converts the reply back, so a
transcript can be resumed with either SDK and the tests can replay it against a local server.
"""

from __future__ import annotations

from agents.providers.base import ModelReply, Provider, ProviderConfig, ProviderError, ToolSpec


def make_provider(config: ProviderConfig) -> Provider:
    """The provider named by ``config.provider``: ``openai`` (Chat Completions) or ``anthropic`` (Messages)."""
    if config.provider == "openai":
        from agents.providers.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(config)
    if config.provider == "anthropic":
        from agents.providers.anthropic_messages import AnthropicProvider

        return AnthropicProvider(config)
    raise ValueError(f"unknown provider {config.provider!r}: use openai or anthropic")


__all__ = ["ModelReply", "Provider", "ProviderConfig", "ProviderError", "ToolSpec", "make_provider"]
