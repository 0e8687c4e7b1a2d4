"""`olarespack bench`: an app's speed measured against its OpenAI-compatible server by one method (the seed
posts'): a standard prompt, warm-ups, N runs, tokens per second from the server's own timings where it gives
them; the figures recorded with the release and cited by the descriptions as data (record.py).

client.py talks to the server (bounded), run.py measures and sums up, inbox.py renders the same bench as a
Kubernetes Job or a `kubectl exec` line and reads their logs back, edit.py writes a record into a spec, plot.py
draws the runs."""
