//! The custom resources Kant reads: its own Queue (`kant.io/v1alpha1`) and the
//! scheduler-plugins PodGroup (`scheduling.x-k8s.io/v1alpha1`).
