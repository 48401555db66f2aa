#!/usr/bin/env python3
"""pg_client.py HOST PORT DBNAME - python3-psycopg2 against a real PostgreSQL: statements with
parameters, an error and its rollback, executemany, COPY in and out, a server-side cursor.
Prints every result (repr) so that a traced and an untraced run can be compared."""
import io
import sys

import psycopg2

host, port, db = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = psycopg2.connect(host=host, port=port, dbname=db, user="postgres")
cur = c.cursor()
out = []
cur.execute("DROP TABLE IF EXISTS items")
cur.execute("CREATE TABLE items (id int PRIMARY KEY, name text, data bytea)")
cur.execute("INSERT INTO items VALUES (%s, %s, %s)", (1, "one", b"\x00\x01\xff"))
cur.executemany("INSERT INTO items VALUES (%s, %s, NULL)", [(i, "n%d" % i) for i in range(2, 12)])
c.commit()
cur.execute("SELECT id, name, data FROM items WHERE id < %s ORDER BY id", (4,))
out.append([(r[0], r[1], bytes(r[2]) if r[2] is not None else None) for r in cur.fetchall()])
try:
    cur.execute("SELECT * FROM no_such_table")
except psycopg2.Error as e:
    out.append(("error", e.pgcode))
c.rollback()
buf = io.StringIO("100\tcopied\n101\tcopied too\n")
cur.copy_expert("COPY items (id, name) FROM STDIN", buf)
c.commit()
o = io.StringIO()
cur.copy_expert("COPY (SELECT id, name FROM items WHERE id >= 100 ORDER BY id) TO STDOUT", o)
out.append(o.getvalue())
named = c.cursor(name="srv")
named.execute("SELECT id FROM items ORDER BY id")
out.append(named.fetchmany(3))
named.close()
c.commit()
cur.execute("SELECT repeat('x', 5000)")
out.append(len(cur.fetchone()[0]))
cur.execute("SELECT count(*) FROM items")
out.append(cur.fetchone())
c.close()
for x in out:
    print(repr(x))
