//! The control socket: list and describe over a Unix domain socket (R6.5).
