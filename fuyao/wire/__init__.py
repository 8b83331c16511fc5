"""Agent <-> hub wire protocol: generated protobuf/gRPC code under ``v1`` and its generator."""
