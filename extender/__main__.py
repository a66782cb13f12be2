"""``python -m extender``: Sluicegate's gate controller and scheduler extender."""

from extender.serving import main

raise SystemExit(main())
