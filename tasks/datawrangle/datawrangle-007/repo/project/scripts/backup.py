import shutil
import sys

# TODO(ops): rotate old backups
# TODO(ops) keep 7 daily copies, no colon
def backup(src, dst):
    shutil.copytree(src, dst, dirs_exist_ok=True)


if __name__ == "__main__":
    backup(sys.argv[1], sys.argv[2])  # FIXME(maria): check free space first
