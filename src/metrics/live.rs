//! The live metrics of a running scheduler, exported in Prometheus text format.
