"""The pure core: events, the fold, decisions and the rules over them."""
