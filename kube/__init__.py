"""The only package that talks to the Kubernetes API (kubernetes_asyncio stays inside it).

``connecting``: the connection and its errors; ``resources``: what is addressed and how;
``reflecting``: list-then-watch mirrors of one resource; ``cache``: the reflectors Sluicegate's
processes read, and the policy values (``Catalog``, ``Namespace``) built from them.
"""
