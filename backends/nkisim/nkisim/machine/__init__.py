"""The machine and its costs: per-target hardware constants, the cost tables
(cost_tables.json), instruction issue, the list scheduler (timing model), the state of the
run in progress and `simulate`, which runs a kernel and reports latency and metrics."""
