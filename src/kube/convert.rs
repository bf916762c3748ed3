//! Conversions between Kubernetes objects and the scheduler's model.
