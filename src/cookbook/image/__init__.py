"""Serving images: the base of each platform (docker/<platform>/base.yaml), the port of each
engine family (ports/<family>/port.yaml), the build context `cookbook image` assembles, and
the build itself through the Docker SDK."""
