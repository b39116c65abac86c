"""A submission: options, plan, scheduler, pairs, grading hand-off, report."""
