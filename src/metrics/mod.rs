//! The paper's metrics (GAR, SOR, GFR, JWTD, JTTED). (Being written.)
