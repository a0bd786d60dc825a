//! `ethan-cards`: the card model and its renderers. Pure data and pure functions, no I/O.
