"""The offline GPU run: pack a recipe's engine, dependencies and model here (pack.py), receive
and install them on a host that reaches no registry (scripts/offline-gpu/receive.py, standard library
only, run there by path)."""
