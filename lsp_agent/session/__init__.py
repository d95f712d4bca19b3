"""Sessions on disk: append-only JSONL transcripts, and finding and resuming them."""
