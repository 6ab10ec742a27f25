"""The seed's clicks-per-region demo: sample data and the totals it must produce."""
