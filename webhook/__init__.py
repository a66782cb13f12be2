"""Sluicegate's admission webhook: an aiohttp server over TLS that the API server calls.

``settings`` (flags and environment), ``reviewing`` (one AdmissionReview: parse, decide with
``policy.admitting``, answer), ``denials`` (reasons for metrics), ``metrics``, ``certificates``
(TLS 1.2+, reloaded when the files change), ``application`` (the app factory and the error
middleware), ``serving`` (the process).
"""
