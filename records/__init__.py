"""Run records: one record per workload lifecycle, the trace file that holds them, and what is
computed from them (accounting, synthetic traces). No cluster access: sources feed records in."""
