"""The views' pure rules: each view's rows from events, its kinds of state and query shapes.

Below the store, which applies them inline in every unit of work; no I/O and no clock (an
import contract keeps it so). The runners that rebuild and verify the views from the history
are :mod:`projections`, above the store.
"""
