"""`cookbook bisect`: the first release of a recipe's engine where one gate fails.

releases   the registry's releases between two pins (PyPI's JSON API), in order
search     the binary search itself, pure: versions and a probe in, first bad and steps out
probe      one step: a scratch engine at a version, the recipe served, one gate, its bundle read
report     the Markdown and JSON report of a finished or interrupted search
"""
