"""The guided downgrade: one change at a time, verified and recorded."""
