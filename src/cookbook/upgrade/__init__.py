"""`cookbook upgrade`: move a recipe's engine pin with evidence (scratch engine, fix statuses, gates, report)."""
