"""Certificates: a small certificate authority for the local control plane and the webhook.

Everything is generated with ``cryptography``; nothing is downloaded or shelled out to openssl.
"""
