//! A sink that exports progress gauges and counters through the metrics facade (R6.4).
