"""The what-if simulator: replays a trace's arrivals and durations in virtual time through the
same ``policy.dispatching.dispatch`` the gate controller runs, under a set of Queues, Teams and
a Policy, and measures what the queues would have seen."""
