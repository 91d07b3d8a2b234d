"""Jobs: batches accepted at once, scored in the background, streamed, cancelled, kept across restarts."""
