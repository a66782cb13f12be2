"""``python -m webhook``: Sluicegate's admission server."""

from webhook.serving import main

raise SystemExit(main())
