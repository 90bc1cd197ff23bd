"""Settings of the background worker, loaded from the environment."""

from dataclasses import dataclass, field

from .env import env_bool, env_float, env_int, env_list, env_str


@dataclass
class WorkerSettings:
    queue: str = "default"
    concurrency: int = 4
    retries: int = 3
    timeout_s: float = 30.0
    debug: bool = True
    tags: list = field(default_factory=list)

    @classmethod
    def from_env(cls, environ=None, prefix="WORKER_"):
        d = cls()
        return cls(
            queue=env_str(prefix + "QUEUE", d.queue, environ),
            concurrency=env_int(prefix + "CONCURRENCY", d.concurrency, environ),
            retries=env_int(prefix + "RETRIES", d.retries, environ),
            timeout_s=env_float(prefix + "TIMEOUT_S", d.timeout_s, environ),
            debug=env_bool(prefix + "DEBUG", d.debug, environ),
            tags=env_list(prefix + "TAGS", d.tags, environ),
        )
