"""Checks that the labs' hidden nbgrader test cells call.

`stats` holds the lab-independent statistics (exact binomial tests with a
Bonferroni union bound, power lower bounds, readable failure messages);
`lab1`, `lab2`, ... hold one check function per graded test cell.
"""
