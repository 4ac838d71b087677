"""Gate suite: run a recipe's gates against a live server and record the evidence."""
