"""Model endpoints: OpenAI-compatible chat completions and Anthropic Messages, streamed."""
