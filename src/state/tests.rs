//! Tests of the fabric state (filled in below).
