"""``python -m extender``: the scheduler extender alone."""

from extender.serving import main

raise SystemExit(main())
