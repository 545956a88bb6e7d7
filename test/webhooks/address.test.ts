/**
 * The SSRF rule as a pure function: which resolved addresses a webhook may not go to unless
 * WEBHOOK_ALLOW_PRIVATE=1. Nothing here resolves a name or opens a socket.
 */
import { describe, expect, it } from 'vitest';
import { addressRefusal } from '../../src/webhooks/address.ts';

describe('the webhook address check', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['100.127.255.255', 'private'],
    ['fc00::1', 'private'],
    ['fdff:ffff::1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['0:0:0:0:0:ffff:c0a8:0101', 'private'],
  ])('refuses %s (%s)', (address, kind) => {
    expect(addressRefusal(address)).toBe(kind);
  });

  it.each([
    '8.8.8.8',
    '172.15.255.255',
    '172.32.0.1',
    '192.169.0.1',
    '100.63.255.255',
    '100.128.0.1',
    '2001:db8::1',
    'fec0::1',
    '::ffff:8.8.8.8',
    '2606:4700::1111',
  ])('allows %s', (address) => {
    expect(addressRefusal(address)).toBeUndefined();
  });
});
