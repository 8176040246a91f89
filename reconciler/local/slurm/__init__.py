"""The stack's Slurm in process mode: which install runs (and which per image tag), its site
(paths, ports, keys), the cluster of daemons, accounting (MariaDB and slurmdbd), and what jobs
leave behind."""
