"""topologies.builders."""
