"""Elect: leader election per role, three ways, and a harness to compare them."""
