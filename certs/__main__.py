"""``python -m certs``: the webhook's certificates.

  python -m certs webhook --dir out/                # CA + serving cert for the Service (and the
                                                    # recorder's, which shares it), secret.yaml
  python -m certs webhook --dir out/ --host 127.0.0.1   # also valid for a webhook run locally
  kubectl kustomize manifests/default | python -m certs bundle --ca out/ca.crt | kubectl apply -f -
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from certs import bundles, issuing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m certs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    hook = sub.add_parser(
        "webhook", help="create a CA (unless DIR has one) and the webhook's serving certificate"
    )
    hook.add_argument("--dir", type=Path, required=True, help="where to write ca.*, tls.*, secret.yaml")
    hook.add_argument("--service", default=issuing.SERVICE, help="the webhook Service (default: %(default)s)")
    hook.add_argument("--namespace", default=issuing.NAMESPACE, help="its namespace (default: %(default)s)")
    hook.add_argument("--host", action="append", default=[],
                      help="another DNS name or IP address (repeatable)")
    hook.add_argument("--secret", default=issuing.SECRET, help="the Secret's name (default: %(default)s)")
    hook.add_argument("--new-ca", action="store_true", help="replace the CA in DIR instead of reusing it")
    bundle = sub.add_parser("bundle", help="fill caBundle in the webhook configurations and APIServices of a "
                            "YAML stream")
    bundle.add_argument("--ca", type=Path, required=True, help="the CA certificate (PEM)")
    bundle.add_argument("files", nargs="*", type=Path, help="YAML files (default: standard input)")
    args = parser.parse_args(argv)

    if args.command == "webhook":
        # The recorder and the controller's visibility API serve with the webhook's certificate,
        # so that one names them too.
        also = (issuing.RECORDER, issuing.VISIBILITY) if args.service == issuing.SERVICE else ()
        files = issuing.issue(args.dir, service=args.service, namespace=args.namespace, hosts=args.host,
                              secret=args.secret, new_ca=args.new_ca, also=also)
        print(f"wrote {files.ca_cert}, {files.cert}, {files.key} and {files.secret}")
        return 0
    ca = args.ca.read_bytes()
    texts = [f.read_text() for f in args.files] if args.files else [sys.stdin.read()]
    sys.stdout.write(bundles.fill_text("\n---\n".join(texts), ca))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
